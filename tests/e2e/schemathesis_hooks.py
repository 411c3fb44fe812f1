"""Schemathesis hooks for ``test_schemathesis.py`` (loaded through ``SCHEMATHESIS_HOOKS``).

They touch only generated *valid* requests, and only for rules a JSON Schema cannot state or
that depend on the world rather than on the request, each written in openapi.yaml's words:

- ``max_delay`` at least ``base_delay``, ``max_open_for`` at least ``open_for`` (a relation
  between two numbers);
- ``depends_on`` and ``after_group`` name tasks and groups that exist (422 otherwise);
- an endpoint URL, or a task's notify URL, resolves to an address the gateway may push to
  (here: loopback);
- an ``Idempotency-Key`` reused with another body is refused (422): each request gets its own;
- an endpoint's task list names each task once, and each schema is a usable JSON Schema: the
  names are made unique and every schema becomes ``{}`` (any payload), which also keeps the
  task catalog from refusing the payloads of the enqueues generated after it.
"""

from __future__ import annotations

import os
import uuid
from typing import Any

import schemathesis

BREAKER = ("open_for", "max_open_for", 5.0, 300.0)


def _ordered(section: Any, low: str, high: str, low_default: float, high_default: float) -> None:
    if not isinstance(section, dict):
        return
    a, b = section.get(low, low_default), section.get(high, high_default)
    if isinstance(a, int | float) and isinstance(b, int | float) and b < a:
        section[low], section[high] = b, a


def _valid_task(task: Any) -> None:
    if isinstance(task, dict):
        task.pop("depends_on", None)
        task.pop("after_group", None)
        if "notify" in task:
            task["notify"] = os.environ["CONTRACT_ENDPOINT_URL"]


def _valid_catalog(tasks: list[Any]) -> None:
    for i, task in enumerate(tasks):
        if isinstance(task, dict) and "schema" in task:
            task["schema"] = {}
            task["name"] = f"t{i}_{task.get('name', '')}"[:200]


@schemathesis.hook
def map_case(context: Any, case: Any) -> Any:
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive:
        return case
    if case.headers and "Idempotency-Key" in case.headers:
        case.headers["Idempotency-Key"] = uuid.uuid4().hex
    body = case.body
    if isinstance(body, dict):
        _ordered(body.get("backoff"), "base_delay", "max_delay", 1.0, 300.0)
        _ordered(body.get("circuit_breaker"), *BREAKER)
        if "url" in body:
            body["url"] = os.environ["CONTRACT_ENDPOINT_URL"]
        _valid_task(body)
        for task in body.get("tasks") or []:
            _valid_task(task)
        if isinstance(body.get("tasks"), list):
            _valid_catalog(body["tasks"])
    return case
