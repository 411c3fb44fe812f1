"""The gateway's operator routes as request specs: dead letters, what waits, what runs, cleaning.

The same kind of :class:`~sdk.api.Call` as :mod:`sdk.api`, for the routes an operator uses to
see stuck or failed work and repair it; the clients execute them through
:mod:`sdk.client_ops`. Nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from sdk.api import Call, reads, segment
from sdk.wire import (
    CleanRequest,
    CleanResult,
    DeadLetterFilter,
    ResubmitRequest,
    ResubmitResult,
    RunningList,
    ScheduledPage,
    SessionsEnded,
    TaskPage,
    TaskState,
)

if TYPE_CHECKING:
    from sdk.answers import Params

Moment = datetime | str
"""A time bound: an aware :class:`~datetime.datetime`, or an RFC 3339 string sent as is."""


def rfc3339(value: Moment, name: str = "time") -> str:
    """``value`` as an RFC 3339 string in UTC (``...Z``); a naive datetime is refused."""
    if isinstance(value, str):
        return value
    if value.tzinfo is None:
        raise ValueError(f"{name} needs a timezone, e.g. datetime(2030, 1, 1, tzinfo=UTC)")
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _params(**values: str | int | None) -> dict[str, str | int]:
    return {name: value for name, value in values.items() if value is not None}


def _moment(value: Moment | None, name: str) -> str | None:
    return None if value is None else rfc3339(value, name)


# --- dead letters -------------------------------------------------------------------------------


def dead_letters(
    queue: str | None = None,
    name: str | None = None,
    version: str | None = None,
    owner: str | None = None,
    since: Moment | None = None,
    until: Moment | None = None,
    limit: int = 100,
    cursor: str | None = None,
) -> Call[TaskPage]:
    """``GET /v1/deadletters``: dead tasks, oldest death first, each with its attempts."""
    params: Params = _params(
        queue=queue,
        name=name,
        version=version,
        owner=owner,
        since=_moment(since, "since"),
        until=_moment(until, "until"),
        limit=limit,
        cursor=cursor,
    )
    return Call("GET", "/v1/deadletters", reads(TaskPage), params=params)


def dead_letter_filter(value: DeadLetterFilter | Mapping[str, Any]) -> DeadLetterFilter:
    """A filter from a model or a plain mapping (``{"queue": "emails"}``), validated here."""
    if isinstance(value, DeadLetterFilter):
        return value
    return DeadLetterFilter.model_validate(dict(value))


def resubmit(
    ids: Iterable[str] | None = None,
    filter: DeadLetterFilter | Mapping[str, Any] | None = None,
    limit: int = 1000,
    reset_attempts: bool = True,
) -> Call[ResubmitResult]:
    """``POST /v1/deadletters/resubmit``: queue dead tasks again, by ids or by a filter."""
    chosen = [ids] if isinstance(ids, str) else None if ids is None else list(ids)
    body = ResubmitRequest(
        ids=chosen,
        filter=None if filter is None else dead_letter_filter(filter),
        limit=limit,
        reset_attempts=reset_attempts,
    )
    return Call("POST", "/v1/deadletters/resubmit", reads(ResubmitResult), body=body)


# --- scheduled and running ----------------------------------------------------------------------


def scheduled(queue: str, limit: int = 100, cursor: str | None = None) -> Call[ScheduledPage]:
    """``GET /v1/queues/{queue}/scheduled``: delayed tasks and retries waiting for their time."""
    params: Params = _params(limit=limit, cursor=cursor)
    return Call(
        "GET", f"/v1/queues/{segment(queue)}/scheduled", reads(ScheduledPage), params=params
    )


def running(
    queue: str | None = None, owner: str | None = None, limit: int = 500
) -> Call[RunningList]:
    """``GET /v1/running``: running tasks, where and for how long, stalled ones flagged."""
    params: Params = _params(queue=queue, owner=owner, limit=limit)
    return Call("GET", "/v1/running", reads(RunningList), params=params)


# --- cleaning -----------------------------------------------------------------------------------


def clean(
    queue: str,
    states: Iterable[TaskState | str] | None = None,
    name: str | None = None,
    older_than: float | timedelta = 0,
    limit: int = 10_000,
    owner: str | None = None,
) -> Call[CleanResult]:
    """``POST /v1/queues/{queue}/clean``: delete finished tasks now (all finished states by
    default), optionally only of one task name, of one owner, and finished at least
    ``older_than`` ago."""
    if isinstance(older_than, timedelta):
        older_than = older_than.total_seconds()
    fields: dict[str, Any] = {"name": name, "older_than": older_than, "limit": limit}
    if owner is not None:
        fields["owner"] = owner
    if states is not None:
        fields["states"] = [TaskState(s) for s in states]
    body = CleanRequest.model_validate(fields)
    return Call("POST", f"/v1/queues/{segment(queue)}/clean", reads(CleanResult), body=body)


def end_key_sessions(key_name: str) -> Call[SessionsEnded]:
    """``DELETE /v1/keys/{key_name}/sessions``: end every admin UI session of an API key."""
    return Call("DELETE", f"/v1/keys/{segment(key_name)}/sessions", reads(SessionsEnded))
