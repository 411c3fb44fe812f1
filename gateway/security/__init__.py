"""Who may call (:mod:`~gateway.security.auth`: API keys and scopes) and where the gateway may
push (:mod:`~gateway.security.ssrf`: which addresses endpoints may resolve to).

Imports settings and core; imported by the app, admin, api, services and dispatch.
"""
