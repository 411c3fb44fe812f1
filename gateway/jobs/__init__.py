"""Recurring jobs: a job's stored definition (:mod:`~gateway.jobs.definition`) and its fire
times as pure functions (:mod:`~gateway.jobs.schedule`). The loop that fires them is
:mod:`gateway.background.job_firing`.

Imports store, never services; imported by services and background.
"""
