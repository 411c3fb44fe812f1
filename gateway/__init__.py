"""Jobgate's gateway.

Its root holds the entry points (``__main__``, :mod:`gateway.cli`), the app factory
(:mod:`gateway.app`) and :mod:`gateway.settings`; everything else lives in a room. Imports flow
one way, down this list (a room imports only rooms below it; tests/unit/test_imports.py checks)::

    __main__, cli       the ``jobgate`` command
    commands            operator commands (they speak to a gateway through the SDK alone)
    serving             processes, sockets, TLS; the dev/test Redis processes
    app                 the app factory: builds every room below and runs the loops
    admin               the admin web UI
    api                 the HTTP routes
    background          the loops: recoverer, redriver, job firing, due loop
    services            what the routes call
    dispatch            pushing tasks to endpoints; the durable HTTP calls the gateway makes
    jobs                recurring jobs' definitions and fire times
    telemetry           metrics and traces
    caches              queues, endpoints and the catalog as hot paths read them
    security            API keys and scopes; which addresses may be pushed to
    settings            configuration
    store               Redis: keys, Lua scripts, the shared clock
    core                errors, ids, retry delays, rate-limit keys
"""
