"""Job schedules to write by hand: ``Crontab(hour="3", timezone="UTC")``, ``Interval(hours=6)``.

They are the wire's :class:`~sdk.wire.CrontabSchedule` and :class:`~sdk.wire.IntervalSchedule`
with their ``kind`` filled in, so a producer need not spell it; anything that takes a schedule
takes either. Fields and rules (cron syntax, timezones, DST) are in ``docs/jobs.md``.
:func:`schedule_text` is how the admin UI and ``jobgate jobs`` show a schedule.
"""

from __future__ import annotations

from typing import Literal

from sdk.wire import CrontabSchedule, IntervalSchedule, Schedule

__all__ = ["Crontab", "Interval", "schedule_text"]


class Crontab(CrontabSchedule):
    """Cron fields (each ``*`` unless given) in ``timezone`` (``UTC`` unless given)."""

    kind: Literal["crontab"] = "crontab"


class Interval(IntervalSchedule):
    """Every ``weeks + days + hours + minutes + seconds``, from ``start_at`` if given."""

    kind: Literal["interval"] = "interval"


def schedule_text(schedule: Schedule | None) -> str:
    """A job's schedule in a few words: ``cron 0 3 * * * (Europe/Berlin)``, ``every 1 h 30 min``,
    or ``manual``."""
    if schedule is None:
        return "manual"
    if isinstance(schedule, CrontabSchedule):
        fields = (
            schedule.minute,
            schedule.hour,
            schedule.day_of_month,
            schedule.month_of_year,
            schedule.day_of_week,
        )
        return f"cron {' '.join(fields)} ({schedule.timezone})"
    units = (("weeks", "w"), ("days", "d"), ("hours", "h"), ("minutes", "min"), ("seconds", "s"))
    parts = [f"{getattr(schedule, name)} {unit}" for name, unit in units if getattr(schedule, name)]
    return "every " + " ".join(parts)
