"""``ctx.invoke``: what a task sends to invoke a child, and what the recorded step gives back
(docs/durable.md, "Invoking a task")."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from pydantic import JsonValue

from sdk.errors import ChildFailed, InvokeChild
from sdk.wire import InvokeIn

DEFAULT_TIMEOUT = 86_400.0
"""Seconds a parent waits for its child by default (a day)."""


def invoke_request(
    step: str,
    task: Any,
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any],
    queue: str | None,
    timeout: float | timedelta,
) -> InvokeChild:
    """The exception that ends the attempt with the ``invoke`` callback: ``task`` is an
    ``@task`` function (its name, and its queue unless ``queue`` is given) or a task name."""
    name = task if isinstance(task, str) else task.name
    if queue is None and not isinstance(task, str):
        queue = task.queue
    if isinstance(timeout, timedelta):
        timeout = timeout.total_seconds()
    from pydantic_core import to_jsonable_python

    payload = to_jsonable_python({"args": list(args), "kwargs": dict(kwargs)})
    body = InvokeIn(step=step, queue=queue, name=name, payload=payload, timeout=timeout)
    return InvokeChild(body)


def child_result(step: str, recorded: JsonValue) -> JsonValue:
    """The child's result from the recorded step; :class:`~sdk.errors.ChildFailed` when it did
    not succeed (failed, dead, cancelled, timed out, or refused by the gateway)."""
    if isinstance(recorded, dict) and recorded.get("state") == "succeeded":
        return recorded.get("result")
    found = recorded if isinstance(recorded, dict) else {}
    raise ChildFailed(
        step, str(found.get("state", "unknown")), str(found.get("id", "")), found.get("error")
    )
