"""Schemathesis hooks for ``test_contract.py`` (loaded through ``SCHEMATHESIS_HOOKS``).

The run keeps ``positive_data_acceptance`` on: a generated *valid* request the gateway refuses
(400, 422) fails it. Every rule of a request body is in openapi.yaml (or answered with a
declared 409 of its own problem type where JSON Schema cannot say it), so no hook drops or
reorders a field to keep a valid request from being refused: an outsider's run with no hooks
at all finds nothing either (docs/testing.md). What stays here depends on the world, not on
the request, and each hook only points a generated value at something that exists:

- ``depends_on`` names tasks that exist (422 otherwise: no schema can know the ids): each
  list becomes the seeded task's id (``CONTRACT_TASK_ID``), and ``after_group`` the group it
  joined (``CONTRACT_GROUP``);
- an endpoint URL, or a task's or job's notify URL, resolves to an address the gateway may
  push to (422 otherwise, after a DNS lookup): here, the gateway's own ``/healthz``;
- an endpoint's task schemas become ``{}`` (any payload): the catalog would otherwise refuse
  the payloads of the enqueues generated after them (422 naming the field), and a schema the
  generator makes may use a keyword wrongly (``{"type": 5}``), which no JSON Schema of a JSON
  Schema that a generator can read rules out (the 2020-12 meta-schema uses ``$dynamicRef``);
- a job's task, a run's queue override and a trigger's queue name a registered queue (here:
  ``st``);
- a long poll (``GET /v1/tasks/{task_id}?wait=``) of a task that exists waits as long as it
  asks, up to 60 s: waits are cut to 2 s, below Schemathesis's request timeout (runs answer
  with real task ids, which Schemathesis then uses there); a lease request's body ``wait``
  (a long poll for tasks) likewise.

A task's ``concurrency_key`` needs no hook: the seeded queue ``st`` has a ``key_concurrency``.
"""

from __future__ import annotations

import os
from typing import Any

import schemathesis


def _existing(task: Any) -> None:
    if not isinstance(task, dict):
        return
    if task.get("depends_on"):
        task["depends_on"] = [os.environ["CONTRACT_TASK_ID"]]
    if task.get("after_group") is not None:
        task["after_group"] = os.environ["CONTRACT_GROUP"]
    if task.get("notify") is not None:
        task["notify"] = os.environ["CONTRACT_ENDPOINT_URL"]


def _any_payload(tasks: list[Any]) -> None:
    for task in tasks:
        if isinstance(task, dict) and "schema" in task:
            task["schema"] = {}


def _registered_queue(body: dict[str, Any], path: str) -> None:
    task = body.get("task")
    if isinstance(task, dict) and "queue" in task:
        task["queue"] = "st"
    if path.endswith("/runs") and isinstance(body.get("queue"), str):
        body["queue"] = "st"


@schemathesis.hook
def map_case(context: Any, case: Any) -> Any:
    if case.query and isinstance(case.query.get("wait"), int | float):
        case.query["wait"] = min(case.query["wait"], 2)
    if isinstance(case.body, dict):
        wait = case.body.get("wait")
        if isinstance(wait, int | float) and 2 < wait <= 60:  # keep invalid waits invalid
            case.body["wait"] = 2
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive:
        return case
    body = case.body
    if isinstance(body, dict):
        if isinstance(body.get("url"), str):
            body["url"] = os.environ["CONTRACT_ENDPOINT_URL"]
        _existing(body)
        if case.path.startswith("/v1/jobs"):
            _registered_queue(body, case.path)
        if case.path.startswith("/v1/triggers/") and isinstance(body.get("queue"), str):
            body["queue"] = "st"
        tasks = body.get("tasks")
        if isinstance(tasks, list):
            for task in tasks:
                _existing(task)
            _any_payload(tasks)
    return case
