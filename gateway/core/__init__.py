"""Small rules every room uses: the error tree (:mod:`~gateway.core.errors`), task ids
(:mod:`~gateway.core.ids`), retry delays (:mod:`~gateway.core.backoff`), a task's rate-limit key
(:mod:`~gateway.core.rate_keys`).

The bottom room: any room may import it, and it imports nothing of the gateway (``sdk.wire``
only).
"""
