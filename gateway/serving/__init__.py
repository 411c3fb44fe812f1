"""Processes, sockets and TLS: running the app (:mod:`~gateway.serving.server`, with
:mod:`~gateway.serving.tcp_server` and :mod:`~gateway.serving.gc_tuning`), the self-signed
certificate of ``jobgate dev --tls`` (:mod:`~gateway.serving.tls`), and the local
``redis-server`` and Redis Cluster processes that ``jobgate dev``, the tests and the benchmarks
start (:mod:`~gateway.serving.redis_server`, :mod:`~gateway.serving.redis_cluster`).

Imports the app factory and settings; only ``gateway.cli`` (and tests, bench) import it.
"""
