"""Stored configuration as the hot paths read it, cached in memory for about a second: queues'
policies and endpoints (:mod:`~gateway.caches.directory`), each queue's task catalog with
compiled schemas (:mod:`~gateway.caches.catalog`).

Imports store and core; imported by the app, services, dispatch and telemetry.
"""
