"""Fire times of job schedules, computed from fixed instants, across DST changes."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from gateway.jobs.schedule import cron_day_of_week, cron_trigger, next_fire_times
from sdk.wire import CrontabSchedule, IntervalSchedule

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")


def ms(*args: int, zone: ZoneInfo | None = None) -> int:
    return int(datetime(*args, tzinfo=zone or UTC).timestamp() * 1000)  # type: ignore[misc]


def local(times: list[int], zone: ZoneInfo) -> list[str]:
    return [datetime.fromtimestamp(t / 1000, zone).strftime("%m-%d %H:%M %Z") for t in times]


def cron(zone: str = "UTC", **fields: str) -> CrontabSchedule:
    return CrontabSchedule(kind="crontab", timezone=zone, **fields)


def test_a_skipped_local_time_fires_at_the_first_instant_after_the_gap() -> None:
    # 2026-03-29: Berlin jumps from 02:00 CET to 03:00 CEST; 02:30 does not exist.
    times = next_fire_times(cron("Europe/Berlin", hour="2", minute="30"), ms(2026, 3, 28), 3)
    assert local(times, BERLIN) == ["03-28 02:30 CET", "03-29 03:00 CEST", "03-30 02:30 CEST"]
    assert times[1] == ms(2026, 3, 29, 1, 0)  # the change itself, 01:00 UTC


def test_skipped_times_landing_on_one_instant_fire_once() -> None:
    schedule = cron("Europe/Berlin", hour="1-3", minute="*/30")
    times = next_fire_times(schedule, ms(2026, 3, 28, 12), 4)
    # 02:00 and 02:30 are skipped; both would land on 03:00, which fires once anyway.
    assert local(times, BERLIN) == [
        "03-29 01:00 CET",
        "03-29 01:30 CET",
        "03-29 03:00 CEST",
        "03-29 03:30 CEST",
    ]


def test_a_repeated_local_time_fires_once_at_its_first_occurrence() -> None:
    # 2026-10-25: Berlin goes back from 03:00 CEST to 02:00 CET; 02:30 happens twice.
    times = next_fire_times(cron("Europe/Berlin", hour="2", minute="30"), ms(2026, 10, 24, 12), 2)
    assert times == [ms(2026, 10, 25, 0, 30), ms(2026, 10, 26, 1, 30)]
    assert local(times, BERLIN) == ["10-25 02:30 CEST", "10-26 02:30 CET"]


def test_an_hourly_job_skips_the_repeated_hour() -> None:
    times = next_fire_times(cron("America/New_York", minute="0"), ms(2026, 11, 1, 4, 30), 4)
    # 2026-11-01: New York goes back at 02:00 EDT to 01:00 EST; 01:00 fires once.
    assert local(times, NEW_YORK) == [
        "11-01 01:00 EDT",
        "11-01 02:00 EST",
        "11-01 03:00 EST",
        "11-01 04:00 EST",
    ]


def test_after_is_inside_the_repeated_hour() -> None:
    # 01:15 EST is the second 01:15; the first 01:30 (EDT) is already past, the next is 02:00.
    after = ms(2026, 11, 1, 6, 15)
    times = next_fire_times(cron("America/New_York", minute="0,30"), after, 2)
    assert local(times, NEW_YORK) == ["11-01 02:00 EST", "11-01 02:30 EST"]


def test_fire_times_are_strictly_after() -> None:
    at = ms(2026, 1, 1, 9, 0)
    assert next_fire_times(cron(hour="9", minute="0"), at, 1) == [ms(2026, 1, 2, 9, 0)]
    assert next_fire_times(cron(hour="9", minute="0"), at - 1, 1) == [at]


def test_day_of_week_counts_from_sunday_as_in_crontab() -> None:
    assert cron_day_of_week("0") == "sun"
    assert cron_day_of_week("7") == "sun"
    assert cron_day_of_week("1-5") == "mon,tue,wed,thu,fri"
    assert cron_day_of_week("*/2") == "sun,tue,thu,sat"
    assert cron_day_of_week("sat,0") == "sun,sat"
    # 2026-01-01 is a Thursday; weekdays at 09:00 UTC.
    times = next_fire_times(cron(hour="9", minute="0", day_of_week="1-5"), ms(2026, 1, 1), 3)
    assert [datetime.fromtimestamp(t / 1000, UTC).strftime("%a") for t in times] == [
        "Thu",
        "Fri",
        "Mon",
    ]


@pytest.mark.parametrize(
    ("field", "value"),
    [("minute", "61"), ("hour", "24"), ("day_of_week", "8"), ("month_of_year", "13")],
)
def test_a_bad_field_is_named(field: str, value: str) -> None:
    with pytest.raises(ValueError, match=field):
        cron_trigger(cron(**{field: value}))


def test_an_interval_is_elapsed_time_from_its_anchor_across_dst() -> None:
    schedule = IntervalSchedule(kind="interval", hours=1)
    anchor = ms(2026, 3, 29, 0, 30)
    times = next_fire_times(schedule, anchor - 1, 3, anchor_ms=anchor)
    assert times == [anchor, anchor + 3_600_000, anchor + 7_200_000]
    assert local(times, BERLIN) == ["03-29 01:30 CET", "03-29 03:30 CEST", "03-29 04:30 CEST"]
    # strictly after, from any instant
    assert next_fire_times(schedule, anchor + 1, 1, anchor_ms=anchor) == [anchor + 3_600_000]


def test_an_interval_with_start_at_ignores_the_anchor() -> None:
    start = datetime(2030, 1, 1, tzinfo=UTC)
    schedule = IntervalSchedule(kind="interval", minutes=30, start_at=start)
    assert next_fire_times(schedule, 0, 2, anchor_ms=123) == [
        ms(2030, 1, 1),
        ms(2030, 1, 1, 0, 30),
    ]


def test_an_interval_under_a_second_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one second"):
        IntervalSchedule(kind="interval")
    with pytest.raises(ValueError, match="integer"):
        IntervalSchedule.model_validate({"kind": "interval", "seconds": 0.5})


def test_fire_times_end_with_the_last_date_time() -> None:
    start = datetime(9999, 12, 1, tzinfo=UTC)
    schedule = IntervalSchedule(kind="interval", weeks=1, start_at=start)
    times = next_fire_times(schedule, 0, 100)
    assert len(times) == 5  # December 1, 8, 15, 22, 29 of the year 9999; nothing after
