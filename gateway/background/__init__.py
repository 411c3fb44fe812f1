"""The background loops each gateway runs beside its requests, each with ``step(now_ms)``.

The recoverer (:mod:`~gateway.background.recover_loop`) and its work on one due queue
(:mod:`~gateway.background.queue_recovery`); the redriver (:mod:`~gateway.background.redriver`);
job firing (:mod:`~gateway.background.job_firing`); the loop that drives job firing and
completion callbacks (:mod:`~gateway.background.due_loop`).

Imports services, jobs, telemetry, store and core; only the app factory imports it.
"""
