"""Fire times of a job's schedule, as pure functions of (schedule, after, count).

Crontab schedules are wall-clock times in their timezone. APScheduler's ``CronTrigger`` finds
the wall-clock times that match the fields (computed in a zone without DST, so it never sees a
gap or a repeat); this module then turns each wall-clock time into an instant with the rule
``docs/jobs.md`` documents:

- a wall-clock time skipped by a DST change (02:30 on a spring-forward night in Europe/Berlin)
  fires at the first instant after the gap (03:00 local), and several skipped times that land on
  that instant fire once;
- a wall-clock time that happens twice (02:30 on a fall-back night) fires once, at its first
  occurrence.

Interval schedules are real elapsed time (every 3600 s is every 3600 s across a DST change),
counted from an anchor: ``start_at``, or one interval after the schedule was saved.

Times are milliseconds since the Unix epoch (the store's unit), in and out.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, tzinfo
from itertools import takewhile
from zoneinfo import ZoneInfo

from apscheduler.triggers.cron import CronTrigger

from sdk.wire import CrontabSchedule, IntervalSchedule, Schedule
from sdk.wire.jobs import CRON_NAMES, CRON_RANGES
from sdk.wire.jobs import WEEKDAYS as _DAYS

LAST_MS = 253_402_300_799_999
"""9999-12-31T23:59:59.999Z, the last instant a date-time can show: no fire time after it."""
MAX_CRON_STEPS = 10_000
"""Most fire times stepped through to find the last one missed; beyond, the last one reached
stands for them."""

CRON_FIELDS = ("minute", "hour", "day_of_week", "day_of_month", "month_of_year")
_APSCHEDULER_NAME = {"day_of_month": "day", "month_of_year": "month"}
_PART = re.compile(r"(\*|[0-9]+|[a-z]{3})(?:-([0-9]+|[a-z]{3}))?(?:/([0-9]+))?")


def _number(field: str, text: str) -> int:
    names = CRON_NAMES.get(field, ())
    if text in names:
        return names.index(text) + (1 if field == "month_of_year" else 0)
    return int(text)


def _values(field: str, part: re.Match[str]) -> list[int]:
    """The values one part (``*``, ``a``, ``a-b``, each with an optional ``/step``) stands for.
    A range whose end is below its start wraps around (hour ``22-2`` is 22, 23, 0, 1, 2); a
    step counts from the part's first value, so one past the range keeps that value only."""
    low, high = CRON_RANGES[field]
    if field == "day_of_week":
        high = 6  # 7 is Sunday again: taken as a value, never counted past
    start, end, step = part.groups()
    if start == "*":
        first, last = low, high
    else:
        first = _number(field, start)
        last = _number(field, end) if end else (high if step else first)
    if field == "day_of_week" and not (first <= last <= 7):
        first, last = first % 7, last % 7  # 7-3 is 0-3; 5-0 wraps
    if first <= last:
        span = list(range(first, last + 1))
    else:
        span = [*range(first, high + 1), *range(low, last + 1)]
    return span[:: max(int(step or 1), 1)]


def cron_field(field: str, expr: str) -> str:
    """One crontab field as APScheduler's ``CronTrigger`` reads it: each part (the schema's
    grammar, ``sdk.wire.jobs.cron_pattern``) as the list of values it stands for, weekdays by
    name (APScheduler counts them from Monday, crontab from Sunday); ``day_of_month``'s
    ``last`` and ``<nth> <day>`` are APScheduler's own and kept as they are."""
    values: set[int] = set()
    kept: list[str] = []
    for text in re.split(r" *, *", expr.strip().lower()):
        part = _PART.fullmatch(text)
        if part is None:
            kept.append(" ".join(text.split()))
        else:
            values.update(_values(field, part))
    if field == "day_of_week":
        words = [_DAYS[day] for day in sorted({value % 7 for value in values})]
    else:
        words = [str(value) for value in sorted(values)]
    return ",".join([*words, *kept])


def cron_day_of_week(expr: str) -> str:
    """crontab's ``day_of_week`` (0 or 7 = Sunday) as APScheduler spells it (names)."""
    return cron_field("day_of_week", expr)


def cron_trigger(schedule: CrontabSchedule) -> CronTrigger:
    """The trigger of the schedule's wall-clock times (in UTC, which has no DST); raises
    ValueError naming the field that APScheduler refuses (none of those the schema admits)."""
    fields: dict[str, str] = {}
    for name in CRON_FIELDS:
        value = cron_field(name, getattr(schedule, name))
        try:
            CronTrigger(timezone=UTC, **{_APSCHEDULER_NAME.get(name, name): value})
        except ValueError as e:
            raise ValueError(f"{name}: {e}") from e
        fields[_APSCHEDULER_NAME.get(name, name)] = value
    return CronTrigger(timezone=UTC, **fields)


def _to_ms(when: datetime) -> int:
    return int(when.timestamp() * 1000)


def _from_ms(ms: int, zone: tzinfo = UTC) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).astimezone(zone)


def _instant(wall: datetime, zone: ZoneInfo) -> int:
    """The instant (ms) a naive wall-clock time stands for in ``zone``: its first occurrence
    when it happens twice, the end of the gap when it does not happen at all."""
    first = wall.replace(tzinfo=zone, fold=0)
    utc = first.astimezone(UTC)
    if utc.astimezone(zone).replace(tzinfo=None) == wall:
        return _to_ms(utc)
    # In a gap: fold=0 reads it with the offset before the change (an instant after the gap
    # started), fold=1 with the one after (before it). The change lies between the two.
    low = _to_ms(wall.replace(tzinfo=zone, fold=1).astimezone(UTC))
    high = _to_ms(utc)
    low, high = min(low, high), max(low, high)
    offset = _from_ms(high, zone).utcoffset()
    while high - low > 1000:
        mid = (low + high) // 2
        if _from_ms(mid, zone).utcoffset() == offset:
            high = mid
        else:
            low = mid
    return high - high % 1000


def _cron_instants(schedule: CrontabSchedule, after_ms: int) -> Iterator[int]:
    """Fire instants strictly after ``after_ms``, in order, each once."""
    zone = ZoneInfo(schedule.timezone)
    trigger = cron_trigger(schedule)
    # The wall-clock time of ``after``: no later wall-clock time maps to an earlier instant.
    wall = _from_ms(after_ms, zone).replace(tzinfo=UTC)
    previous: datetime | None = None
    last = after_ms
    while True:
        fire = trigger.get_next_fire_time(previous, wall)
        if fire is None:
            return
        previous = wall = fire
        instant = _instant(fire.replace(tzinfo=None), zone)
        if instant > last:
            last = instant
            yield instant


def _interval_instants(schedule: IntervalSchedule, after_ms: int, anchor_ms: int) -> Iterator[int]:
    period = round(schedule.total_seconds * 1000)
    start = _to_ms(schedule.start_at) if schedule.start_at is not None else anchor_ms
    k = 0 if after_ms < start else (after_ms - start) // period + 1
    while True:
        yield start + k * period
        k += 1


def fire_times(schedule: Schedule, after_ms: int, *, anchor_ms: int = 0) -> Iterator[int]:
    """Every fire time strictly after ``after_ms``, in order, up to :data:`LAST_MS`.
    ``anchor_ms`` is the first fire time of an interval schedule without ``start_at``."""
    if isinstance(schedule, CrontabSchedule):
        found = _cron_instants(schedule, after_ms)
    else:
        found = _interval_instants(schedule, after_ms, anchor_ms)
    return takewhile(lambda when: when <= LAST_MS, found)


def next_fire_times(
    schedule: Schedule, after_ms: int, count: int, *, anchor_ms: int = 0
) -> list[int]:
    """The next ``count`` fire times strictly after ``after_ms``."""
    found: list[int] = []
    for when in fire_times(schedule, after_ms, anchor_ms=anchor_ms):
        if len(found) == count:
            break
        found.append(when)
    return found


def next_fire_time(schedule: Schedule | None, after_ms: int, *, anchor_ms: int = 0) -> int | None:
    """The first fire time strictly after ``after_ms``; None without a schedule."""
    if schedule is None:
        return None
    times = next_fire_times(schedule, after_ms, 1, anchor_ms=anchor_ms)
    return times[0] if times else None


def first_anchor(schedule: Schedule | None, saved_ms: int) -> int:
    """The anchor of an interval schedule saved at ``saved_ms``: one interval later."""
    if isinstance(schedule, IntervalSchedule):
        return saved_ms + round(schedule.total_seconds * 1000)
    return saved_ms


def timezone_of(schedule: Schedule | None) -> str | None:
    return schedule.timezone if isinstance(schedule, CrontabSchedule) else None


__all__ = [
    "MAX_CRON_STEPS",
    "cron_day_of_week",
    "cron_field",
    "cron_trigger",
    "fire_times",
    "first_anchor",
    "next_fire_time",
    "next_fire_times",
    "timezone_of",
]
