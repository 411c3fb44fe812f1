"""A job's definition as stored (the ``def`` field of its hash), and the job as the API shows it."""

from __future__ import annotations

import functools
import os
import re
import zoneinfo
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gateway.jobs.schedule import first_anchor
from gateway.store.jobs import StoredJob
from gateway.store.records import to_datetime
from sdk.wire import Job, JobCreate, RunSummary
from sdk.wire.jobs import CRON_RANGES
from sdk.wire.timezones import timezones


class Definition(JobCreate):
    """What ``POST /v1/jobs`` took, with when it was created and last changed and the anchor of
    an interval schedule (its first fire time when it has no ``start_at``)."""

    created_ms: int
    updated_ms: int
    anchor_ms: int


def definition(job: StoredJob) -> Definition:
    return Definition.model_validate(_readable(job.definition))


def _readable(stored: dict[str, Any]) -> dict[str, Any]:
    """A definition as stored, readable by this gateway. Gateways before the fixed list of zone
    names (``sdk/wire/timezones.py``) took any name of the machine's tz database, which holds
    ``localtime``: the machine's own zone, a name this version refuses, so a job stored with it
    failed validation on every read (a 500 for its page, the jobs list, and each firing). It is
    read as the zone that name stood for on this machine (:func:`machine_zone`), which is what
    those gateways computed its fire times in; the next save stores that name.

    Crontab fields are read the same way: gateways before the fields' patterns took spaces
    inside a field (``mon - fri``, stripped for the day of the week), which the patterns refuse
    but around commas and at the ends; such a field reads with those spaces dropped, meaning
    what it meant (``mon-fri``), and the next save stores that."""
    schedule = stored.get("schedule")
    if not isinstance(schedule, dict):
        return stored
    if schedule.get("timezone") == "localtime":
        schedule = {**schedule, "timezone": machine_zone()}
    if schedule.get("kind") == "crontab":
        schedule = {
            name: _INNER_SPACES.sub(r"\1", value)
            if name in CRON_RANGES and isinstance(value, str)
            else value
            for name, value in schedule.items()
        }
    return {**stored, "schedule": schedule}


# Spaces around a range's dash or a step's slash: what older gateways stored and this one's
# crontab patterns refuse.
_INNER_SPACES = re.compile(r" *([-/]) *")


@functools.cache
def machine_zone(tzpath: Sequence[str] = zoneinfo.TZPATH) -> str:
    """The IANA name of the zone ``localtime`` names in the machine's tz database (its link's
    target under ``zoneinfo/``, e.g. ``Europe/Berlin``), or ``UTC`` when it names none."""
    for folder in tzpath:
        link = Path(folder) / "localtime"
        if link.exists():
            _, found, name = os.path.realpath(link).partition("zoneinfo/")
            if found and name in timezones():
                return name
    return "UTC"


def new_definition(spec: JobCreate, now_ms: int, previous: Definition | None = None) -> Definition:
    """``spec`` to store at ``now_ms``, replacing ``previous`` (whose creation time it keeps, and
    its interval anchor when the schedule did not change)."""
    anchor = first_anchor(spec.schedule, now_ms)
    if previous is not None and previous.schedule == spec.schedule:
        anchor = previous.anchor_ms
    return Definition.model_validate(
        {
            **spec.model_dump(),
            "created_ms": previous.created_ms if previous else now_ms,
            "updated_ms": now_ms,
            "anchor_ms": anchor,
        }
    )


def encode(found: Definition) -> str:
    return found.model_dump_json()


def spec_of(found: Definition) -> JobCreate:
    fields: dict[str, Any] = found.model_dump(exclude={"created_ms", "updated_ms", "anchor_ms"})
    return JobCreate.model_validate(fields)


def job_view(job: StoredJob, last_run: RunSummary | None) -> Job:
    found = definition(job)
    return Job(
        id=job.id,
        title=found.title,
        description=found.description,
        task=found.task,
        args=found.args,
        schedule=found.schedule,
        active=found.active,
        overlap=found.overlap,
        notify=found.notify,
        created_at=to_datetime(found.created_ms),
        updated_at=to_datetime(found.updated_ms),
        next_run=to_datetime(job.next_ms) if job.next_ms is not None else None,
        last_run=last_run,
        run_count=job.count,
        skipped_count=job.skipped,
    )
