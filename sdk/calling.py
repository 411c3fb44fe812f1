"""``ctx.call``: what a task sends to have the gateway make an HTTP request for it, and what the
recorded step gives back (docs/durable.md, "A durable HTTP call")."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from pydantic import JsonValue, ValidationError

from sdk.errors import CallFailed, CallOut
from sdk.wire import CallIn

DEFAULT_TIMEOUT = 60.0
"""Seconds one try of a call may take by default."""


def call_request(
    step: str,
    url: str,
    method: str | None,
    json: Any,
    body: str | None,
    headers: Mapping[str, str] | None,
    timeout: float | timedelta,
) -> CallOut:
    """The exception that ends the attempt with the ``call`` callback. ``method`` defaults to
    POST when there is a body, else GET. A request the gateway would refuse raises
    ``ValueError`` here, in the task, with pydantic's reasons."""
    from pydantic_core import to_jsonable_python

    if isinstance(timeout, timedelta):
        timeout = timeout.total_seconds()
    if method is None:
        method = "GET" if json is None and body is None else "POST"
    fields = {
        "step": step,
        "url": url,
        "method": method.upper(),
        "headers": dict(headers or {}),
        "json": to_jsonable_python(json),
        "body": body,
        "timeout": timeout,
    }
    try:
        return CallOut(CallIn.model_validate(fields))
    except ValidationError as e:
        raise ValueError(f"ctx.call({step!r}): {e}") from e


def call_answer(step: str, recorded: JsonValue) -> JsonValue:
    """The answer from the recorded step, ``{"status", "headers", "body"}``;
    :class:`~sdk.errors.CallFailed` when no answer came."""
    if isinstance(recorded, dict) and "status" in recorded:
        return recorded
    found = recorded if isinstance(recorded, dict) else {}
    raise CallFailed(step, str(found.get("kind", "unknown")), str(found.get("error", "")))
