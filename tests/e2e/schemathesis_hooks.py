"""Schemathesis hooks for ``test_contract.py`` (loaded through ``SCHEMATHESIS_HOOKS``).

The run keeps ``positive_data_acceptance`` on: a generated *valid* request the gateway refuses
fails it. So these hooks touch only valid requests, and only for rules a JSON Schema cannot
state or that depend on the world rather than on the request, each written in openapi.yaml's
words (a rule the schema can state belongs in the schema, not here):

- ``max_delay`` at least ``base_delay``, ``max_open_for`` at least ``open_for`` (a relation
  between two numbers);
- ``depends_on`` and ``after_group`` name tasks and groups that exist (422 otherwise), and
  ``pass_results`` needs ``depends_on``: the three are dropped;
- an endpoint URL, or a task's notify URL, resolves to an address the gateway may push to
  (here: loopback);
- a task's ``concurrency_key`` needs a queue with ``key_concurrency`` (422 otherwise): it is
  dropped; a ``debounce`` comes with none of the options it cannot be combined with, and its
  ``max_wait`` at least its ``window`` (both stated in openapi.yaml's descriptions);
- an ``Idempotency-Key`` reused with another body is refused (422): each request gets its own;
- a batch gives a task id at most once: a repeated id is dropped (the gateway makes one);
- an endpoint's task list names each task once, and each schema is a usable JSON Schema: the
  names are made unique and every schema becomes ``{}`` (any payload), which also keeps the
  task catalog from refusing the payloads of the enqueues generated after it.
- a long poll (``GET /v1/tasks/{task_id}?wait=``) of a task that exists waits as long as it
  asks, up to 60 s: waits are cut to 2 s, below Schemathesis's request timeout (runs answer
  with real task ids, which Schemathesis then uses there); a lease request's body ``wait``
  (a long poll for tasks) likewise;
- an endpoint has a ``url`` unless it is a pull one, and then none;
- a job's task, and a run's queue override, name a registered queue (here: ``st``); a
  crontab's fields parse as cron (APScheduler's grammar; the schema's pattern only bounds
  their characters).

A crontab's timezone needs no hook: the schema lists every accepted name.
"""

from __future__ import annotations

import os
import uuid
from typing import Any

import schemathesis
from pydantic import BaseModel

from gateway.jobs.schedule import CRON_FIELDS, cron_trigger
from sdk.wire import Backoff, CircuitBreaker, CrontabSchedule
from sdk.wire.tasks import _NOT_WITH_DEBOUNCE

ORDERED: tuple[tuple[str, type[BaseModel], str, str], ...] = (
    ("backoff", Backoff, "base_delay", "max_delay"),
    ("circuit_breaker", CircuitBreaker, "open_for", "max_open_for"),
)
"""The rules between two numbers of one section, which openapi.yaml states in the fields'
descriptions: ``high`` at least ``low``, a field not given taking the model's default (a
section is given whole, in a PUT and in a PATCH alike)."""


def _ordered(body: dict[str, Any]) -> None:
    for name, model, low, high in ORDERED:
        section = body.get(name)
        if not isinstance(section, dict):
            continue
        fields = model.model_fields
        a = section.get(low, fields[low].default)
        b = section.get(high, fields[high].default)
        if isinstance(a, int | float) and isinstance(b, int | float) and b < a:
            section[low], section[high] = b, a


def _valid_task(task: Any) -> None:
    if isinstance(task, dict):
        task.pop("depends_on", None)
        task.pop("after_group", None)
        task.pop("pass_results", None)
        task.pop("concurrency_key", None)
        debounce = task.get("debounce")
        if isinstance(debounce, dict):
            for clash in _NOT_WITH_DEBOUNCE:
                task.pop(clash, None)
            window, most = debounce.get("window"), debounce.get("max_wait")
            if isinstance(window, int | float) and isinstance(most, int | float) and most < window:
                debounce["window"], debounce["max_wait"] = most, window
        if "notify" in task:
            task["notify"] = os.environ["CONTRACT_ENDPOINT_URL"]


def _valid_catalog(tasks: list[Any]) -> None:
    for i, task in enumerate(tasks):
        if isinstance(task, dict) and "schema" in task:
            task["schema"] = {}
            task["name"] = f"t{i}_{task.get('name', '')}"[:200]


def _valid_job(body: dict[str, Any], path: str) -> None:
    task = body.get("task")
    if isinstance(task, dict) and "queue" in task:
        task["queue"] = "st"
    if path.endswith("/runs") and isinstance(body.get("queue"), str):
        body["queue"] = "st"
    schedule = body.get("schedule")
    if not isinstance(schedule, dict) or schedule.get("kind") != "crontab":
        return
    for name in CRON_FIELDS:
        try:
            cron_trigger(CrontabSchedule.model_validate({"kind": "crontab", name: schedule[name]}))
        except (KeyError, ValueError):
            schedule.pop(name, None)


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
    if case.headers and "Idempotency-Key" in case.headers:
        case.headers["Idempotency-Key"] = uuid.uuid4().hex
    body = case.body
    if isinstance(body, dict):
        _ordered(body)
        if case.path.endswith("/endpoints"):
            if body.get("pull") is True:
                body.pop("url", None)
            else:
                body["url"] = os.environ["CONTRACT_ENDPOINT_URL"]
        elif "url" in body:
            body["url"] = os.environ["CONTRACT_ENDPOINT_URL"]
        _valid_task(body)
        if case.path.startswith("/v1/jobs"):
            _valid_job(body, case.path)
        ids: set[str] = set()
        for task in body.get("tasks") or []:
            _valid_task(task)
            if isinstance(task, dict) and task.get("id") is not None:
                if str(task["id"]).upper() in ids:
                    task.pop("id")
                else:
                    ids.add(str(task["id"]).upper())
        if isinstance(body.get("tasks"), list):
            _valid_catalog(body["tasks"])
    return case
