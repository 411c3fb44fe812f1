"""Jobs and their runs: recurring or on-demand task definitions, and each firing of one.

A job names a task (queue and task name) with default arguments and a schedule: ``crontab``
(with an IANA timezone), ``interval``, or none (manual runs only). Each firing, and each
"run now", makes a **run**: a task enqueued into the job's queue, linked to its job. A run's
status is read from its task's state (see :class:`RunStatus`). ``docs/jobs.md`` is the guide.
"""

from __future__ import annotations

import functools
import re
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Literal, Self

from pydantic import AfterValidator, ConfigDict, Field, JsonValue, model_validator
from pydantic_core import PydanticCustomError

from sdk.wire.base import (
    InputModel,
    Json,
    OutputModel,
    QueueName,
    TaskName,
    Timestamp,
    WebUrl,
)
from sdk.wire.timezones import add_pattern, check_timezone

LAST_SUCCESSFUL_RUN = "{{ last_successful_run }}"
"""The one template default args may hold: a string value exactly equal to it becomes the start
time of the job's last successful run (RFC 3339), or null when there is none."""


TimezoneName = Annotated[
    str,
    AfterValidator(check_timezone),
    # The pattern is made when a schema is asked for, not when the SDK is imported.
    Field(json_schema_extra=add_pattern),
]
WEEKDAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
"""crontab's day names, from 0; 7 is Sunday again."""
MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
"""crontab's month names, from 1."""
CRON_RANGES = {
    "minute": (0, 59),
    "hour": (0, 23),
    "day_of_week": (0, 7),
    "day_of_month": (1, 31),
    "month_of_year": (1, 12),
}
"""The values each crontab field takes."""
CRON_NAMES = {"day_of_week": WEEKDAYS, "month_of_year": MONTHS}


def _any_case(word: str) -> str:
    return "".join(f"[{c.upper()}{c}]" for c in word)


def cron_pattern(field: str) -> str:
    """The JSON Schema pattern of one crontab field: a comma list (spaces allowed around its
    commas and ends) of ``*``, a value or a range
    ``a-b`` (an end below its start wraps around), each with an optional ``/step`` (a whole
    number from 1; a step past the range keeps its first value only). Values are the field's
    numbers (leading zeros allowed, within the range only) and, for months and weekdays, their
    names in any case; ``day_of_month`` also takes APScheduler's ``last`` and ``<nth> <day>``
    (``1st``-``5th`` or ``last``, e.g. ``last fri``). So every value the pattern admits means
    a set of fire times (docs/jobs.md)."""
    low, high = CRON_RANGES[field]
    value = "0*(?:" + "|".join(str(n) for n in range(high, low - 1, -1)) + ")"
    names = CRON_NAMES.get(field, ())
    if names:
        value = f"(?:{value}|{'|'.join(_any_case(name) for name in names)})"
    token = rf"(?:\*|{value}(?:-{value})?)(?:/0*[1-9][0-9]*)?"
    if field == "day_of_month":
        nth = "|".join(_any_case(n) for n in ("1st", "2nd", "3rd", "4th", "5th", "last"))
        days = "|".join(_any_case(day) for day in WEEKDAYS)
        token = f"(?:{token}|{_any_case('last')}|(?:{nth}) +(?:{days}))"
    return f"^ *{token}(?: *, *{token})* *$"


@functools.cache
def _cron_regex(field: str) -> re.Pattern[str]:
    return re.compile(cron_pattern(field).removeprefix("^").removesuffix("$"))


def _cron_check(field: str) -> AfterValidator:
    low, high = CRON_RANGES[field]
    names = CRON_NAMES.get(field)
    message = (
        f"must be a comma list of '*', values {low}-{high}"
        + (f" or names ({names[0]}-{names[-1]})" if names else "")
        + " and ranges 'a-b', each with an optional '/step'"
    )

    def check(value: str) -> str:
        if not _cron_regex(field).fullmatch(value):  # compiled at first use, not at import
            raise PydanticCustomError("crontab_field", message)
        return value

    return AfterValidator(check)


def _cron_field(field: str) -> Any:
    """A crontab field's pattern, in the schema (checked by :func:`_cron_check`, with a
    readable message)."""
    return Field(min_length=1, max_length=100, json_schema_extra={"pattern": cron_pattern(field)})


Minute = Annotated[str, _cron_field("minute"), _cron_check("minute")]
Hour = Annotated[str, _cron_field("hour"), _cron_check("hour")]
DayOfWeek = Annotated[str, _cron_field("day_of_week"), _cron_check("day_of_week")]
DayOfMonth = Annotated[str, _cron_field("day_of_month"), _cron_check("day_of_month")]
MonthOfYear = Annotated[str, _cron_field("month_of_year"), _cron_check("month_of_year")]
Title = Annotated[str, Field(min_length=1, max_length=200)]
Text = Annotated[str, Field(max_length=10_000)]


class OverlapPolicy(StrEnum):
    """What a firing does while the job's previous run is still pending or running."""

    SKIP = "skip"  # no run; the firing is counted as skipped
    QUEUE_ONE = "queue_one"  # hold one firing; it runs when the previous run ends
    ALLOW = "allow"  # a run every time


class CrontabSchedule(InputModel):
    """Cron fields as in crontab(5), each a comma list of ``*``, values and ranges with an
    optional ``/step`` (see :func:`cron_pattern`: the pattern admits exactly what the gateway
    takes); ``day_of_week`` numbers count from Sunday (0 or 7) and names (``mon``-``sun``) work
    too. Times are wall-clock times in ``timezone``, a name of the IANA timezone database."""

    kind: Literal["crontab"]
    minute: Minute = "*"
    hour: Hour = "*"
    day_of_week: DayOfWeek = "*"
    day_of_month: DayOfMonth = "*"
    month_of_year: MonthOfYear = "*"
    timezone: TimezoneName = Field(
        "UTC",
        description="A zone of the IANA tz database (2026f), e.g. 'Europe/Berlin', 'UTC' or "
        "'US/Eastern'; the pattern admits exactly the accepted names.",
    )


_INTERVAL_UNITS = {
    "weeks": 52,
    "days": 366,
    "hours": 8784,
    "minutes": 527_040,
    "seconds": 31_622_400,
}


class IntervalSchedule(InputModel):
    """Every ``weeks + days + hours + minutes + seconds`` (whole numbers, at least one of them
    above 0), from ``start_at``, or from one interval after the schedule was saved."""

    model_config = ConfigDict(
        json_schema_extra={
            "anyOf": [
                {"required": [unit], "properties": {unit: {"minimum": 1}}}
                for unit in _INTERVAL_UNITS
            ]
        }
    )

    kind: Literal["interval"]
    weeks: int = Field(0, ge=0, le=_INTERVAL_UNITS["weeks"])
    days: int = Field(0, ge=0, le=_INTERVAL_UNITS["days"])
    hours: int = Field(0, ge=0, le=_INTERVAL_UNITS["hours"])
    minutes: int = Field(0, ge=0, le=_INTERVAL_UNITS["minutes"])
    seconds: int = Field(0, ge=0, le=_INTERVAL_UNITS["seconds"])
    start_at: Timestamp | None = Field(None, description="The first fire time.")

    @property
    def total_seconds(self) -> int:
        return (
            self.weeks * 604_800
            + self.days * 86_400
            + self.hours * 3_600
            + self.minutes * 60
            + self.seconds
        )

    @model_validator(mode="after")
    def _at_least_a_second(self) -> Self:
        if self.total_seconds < 1:
            raise ValueError("the interval must be at least one second")
        return self


Schedule = Annotated[CrontabSchedule | IntervalSchedule, Field(discriminator="kind")]


class JobTask(InputModel):
    """The task a job's runs are: enqueued into ``queue`` with ``name``."""

    queue: QueueName
    name: TaskName


class JobCreate(InputModel):
    """Body of ``POST /v1/jobs`` and ``PUT /v1/jobs/{job_id}``."""

    title: Title
    description: Text = ""
    task: JobTask
    args: Json = Field(
        None,
        description="Default payload of each run. A string value exactly equal to "
        f"'{LAST_SUCCESSFUL_RUN}' becomes the start time of the last successful run (or null).",
    )
    schedule: Schedule | None = Field(None, description="None: manual runs only.")
    active: bool = Field(True, description="An inactive job does not fire; it can run now.")
    overlap: OverlapPolicy = OverlapPolicy.SKIP
    notify: WebUrl | None = Field(
        None, description="URL told of each run's final state (signed like a push)."
    )


class JobPatch(InputModel):
    """Body of ``PATCH /v1/jobs/{job_id}``: the fields given replace the job's. ``schedule``,
    ``notify`` and ``args`` may be set to null; null for any other field leaves it as is."""

    title: Title | None = None
    description: Text | None = None
    task: JobTask | None = None
    args: Json = None
    schedule: Schedule | None = None
    active: bool | None = None
    overlap: OverlapPolicy | None = None
    notify: WebUrl | None = None


class RunStatus(StrEnum):
    """A run's status, read from its task's state."""

    PENDING = "pending"  # scheduled, waiting or queued
    RUNNING = "running"
    SUCCESS = "success"  # succeeded
    WARNING = "warning"  # succeeded, with a warning message
    FAILURE = "failure"  # failed or dead
    STOPPED = "stopped"  # cancelled

    @property
    def finished(self) -> bool:
        return self not in (RunStatus.PENDING, RunStatus.RUNNING)


class RunSummary(OutputModel):
    id: str
    status: RunStatus
    started_by: str
    created_at: datetime
    started_at: datetime | None = None
    ended_at: datetime | None = None


class Job(OutputModel):
    id: str
    title: str
    description: str = ""
    task: JobTask
    args: JsonValue = None
    schedule: Schedule | None = None
    active: bool
    overlap: OverlapPolicy
    notify: str | None = None
    created_at: datetime
    updated_at: datetime
    next_run: datetime | None = Field(None, description="The next fire time, if any.")
    last_run: RunSummary | None = None
    run_count: int = Field(0, description="Runs made so far (deleted ones included).")
    skipped_count: int = Field(0, description="Firings skipped by the overlap policy.")
    served: bool = Field(
        False,
        description="Whether an enabled endpoint of the job's queue reported, in the task "
        "catalog, that it serves the job's task. False is a warning, not an error: runs still "
        "go to the queue, where an endpoint that reports no catalog may take them.",
    )


class JobPage(OutputModel):
    items: list[Job]
    next_cursor: str | None = None


class RunCreate(InputModel):
    """Body of ``POST /v1/jobs/{job_id}/runs`` (run now). Every field is optional."""

    args: Json = Field(None, description="Replaces the job's default args when given.")
    queue: QueueName | None = Field(None, description="Another registered queue for this run.")
    start_at: Timestamp | None = Field(None, description="Run no earlier than this time.")
    title: Title | None = None
    note: Text | None = None


class Run(OutputModel):
    id: str = Field(description="The run's id, which is also its task's id.")
    job_id: str
    title: str
    note: str | None = None
    started_by: str = Field(description="The API key's name, or 'system' for the schedule.")
    status: RunStatus
    message: str | None = Field(
        None, description="The error of a failure, the warning of a warning, why it stopped."
    )
    args: JsonValue = Field(None, description="The payload the task was given (a snapshot).")
    queue: str
    task_id: str
    fire_time: datetime | None = Field(None, description="The schedule's fire time it is for.")
    created_at: datetime
    started_at: datetime | None = None
    ended_at: datetime | None = None
    attempts: int = 0


class RunPage(OutputModel):
    items: list[Run]
    next_cursor: str | None = None


class FireTimes(OutputModel):
    """``GET /v1/jobs/{job_id}/preview``: the next fire times of the job's schedule."""

    timezone: str | None = None
    items: list[datetime]
