"""Job schedules to write by hand: ``Crontab(hour="3", timezone="UTC")``, ``Interval(hours=6)``.

They are the wire's :class:`~sdk.wire.CrontabSchedule` and :class:`~sdk.wire.IntervalSchedule`
with their ``kind`` filled in, so a producer need not spell it; anything that takes a schedule
takes either. Fields and rules (cron syntax, timezones, DST) are in ``docs/jobs.md``.
"""

from __future__ import annotations

from typing import Literal

from sdk.wire import CrontabSchedule, IntervalSchedule

__all__ = ["Crontab", "Interval"]


class Crontab(CrontabSchedule):
    """Cron fields (each ``*`` unless given) in ``timezone`` (``UTC`` unless given)."""

    kind: Literal["crontab"] = "crontab"


class Interval(IntervalSchedule):
    """Every ``weeks + days + hours + minutes + seconds``, from ``start_at`` if given."""

    kind: Literal["interval"] = "interval"
