"""The job form of the admin UI: what it shows (from a job, or blank) and the ``JobCreate`` a
submitted one describes.

The form's args part is :mod:`gateway.admin.argsform`'s, built from the chosen task's catalog
schema. A problem with what was typed (a field pydantic refuses, args the catalog refuses) is
shown on the form again, with everything typed kept; nothing is saved until all of it is valid.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from gateway.admin.argsform import ArgsForm, Shape, fields_of, form_for, read_args
from gateway.core.errors import FieldProblem
from sdk.wire import CrontabSchedule, IntervalSchedule, Job, JobCreate, OverlapPolicy
from sdk.wire.base import reason

CRON_FIELDS = ("minute", "hour", "day_of_month", "month_of_year", "day_of_week")
INTERVAL_FIELDS = ("weeks", "days", "hours", "minutes", "seconds")
SCHEDULE_KINDS = ("none", "crontab", "interval")
OVERLAPS = tuple(p.value for p in OverlapPolicy)
TASK_SEPARATOR = "/"  # neither queue nor task names may hold it


def task_key(queue: str, name: str) -> str:
    """The value of the task choice: ``queue/name``."""
    return f"{queue}{TASK_SEPARATOR}{name}"


def split_task(key: str) -> tuple[str, str]:
    queue, _, name = key.partition(TASK_SEPARATOR)
    return queue.strip(), name.strip()


@dataclass
class JobForm:
    """Everything the job form shows, as text."""

    title: str = ""
    description: str = ""
    task: str = ""
    schedule: str = "none"
    cron: dict[str, str] = field(
        default_factory=lambda: {
            "minute": "0",
            "hour": "*",
            "day_of_month": "*",
            "month_of_year": "*",
            "day_of_week": "*",
        }
    )
    timezone: str = "UTC"
    interval: dict[str, str] = field(default_factory=lambda: dict.fromkeys(INTERVAL_FIELDS, ""))
    overlap: str = OverlapPolicy.SKIP.value
    active: bool = True
    notify: str = ""
    args: ArgsForm = field(default_factory=lambda: ArgsForm(Shape.JSON))
    problems: list[FieldProblem] = field(default_factory=list)


def blank(task: str, schema: Mapping[str, Any] | None) -> JobForm:
    return JobForm(task=task, args=form_for(schema, None))


def from_job(job: Job, schema: Mapping[str, Any] | None) -> JobForm:
    """The form holding ``job``'s definition."""
    found = JobForm(
        title=job.title,
        description=job.description,
        task=task_key(job.task.queue, job.task.name),
        active=job.active,
        overlap=job.overlap.value,
        notify=job.notify or "",
        args=form_for(schema, job.args),
    )
    if isinstance(job.schedule, CrontabSchedule):
        found.schedule = "crontab"
        found.cron = {name: getattr(job.schedule, name) for name in CRON_FIELDS}
        found.timezone = job.schedule.timezone
    elif isinstance(job.schedule, IntervalSchedule):
        found.schedule = "interval"
        found.interval = {name: str(getattr(job.schedule, name) or "") for name in INTERVAL_FIELDS}
    return found


def problems_of(e: ValidationError) -> list[FieldProblem]:
    problems = []
    for err in e.errors():
        where = [str(p) for p in err["loc"] if p not in ("crontab", "interval")]
        problems.append(FieldProblem(".".join(where) or "form", reason(err)))
    return problems


def read(
    values: Mapping[str, str | None], schema: Mapping[str, Any] | None
) -> tuple[JobCreate | None, JobForm]:
    """The job a submitted form describes (None when something is wrong) and the form to show
    again with what was typed and the problems found."""
    text = {k: (v or "") for k, v in values.items()}
    as_json = text.get("args_mode") == "json"
    shape, fields = (Shape.JSON, ()) if as_json else fields_of(schema)
    args, args_form = read_args(shape, fields, values)
    shown = JobForm(
        title=text.get("title", "").strip(),
        description=text.get("description", "").strip(),
        task=text.get("task", "").strip(),
        schedule=text.get("schedule", "none"),
        cron={name: text.get(f"cron.{name}", "").strip() or "*" for name in CRON_FIELDS},
        timezone=text.get("timezone", "").strip() or "UTC",
        interval={name: text.get(f"interval.{name}", "").strip() for name in INTERVAL_FIELDS},
        overlap=text.get("overlap", OverlapPolicy.SKIP.value),
        active=bool(text.get("active")),
        notify=text.get("notify", "").strip(),
        args=args_form,
        problems=list(args_form.problems),
    )
    queue, name = split_task(shown.task)
    spec: dict[str, Any] = {
        "title": shown.title,
        "description": shown.description,
        "task": {"queue": queue, "name": name},
        "args": args,
        "active": shown.active,
        "overlap": shown.overlap,
        "notify": shown.notify or None,
        "schedule": None,
    }
    if shown.schedule == "crontab":
        spec["schedule"] = {"kind": "crontab", **shown.cron, "timezone": shown.timezone}
    elif shown.schedule == "interval":
        given = {k: v for k, v in shown.interval.items() if v}
        spec["schedule"] = {"kind": "interval", **given}
    elif shown.schedule != "none":
        shown.problems.append(FieldProblem("schedule", "choose none, crontab or interval"))
    try:
        job = JobCreate.model_validate(spec)
    except ValidationError as e:
        shown.problems.extend(problems_of(e))
        return None, shown
    if shown.problems:
        return None, shown
    return job, shown
