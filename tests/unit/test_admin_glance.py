"""The admin UI's reading aids as pure functions: counts with separators, times as <time>
elements, log lines grouped by attempt, and the hour chart's bars."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from gateway.admin.charts import HEIGHT, hour_chart
from gateway.admin.pages.tasks import by_attempt
from gateway.admin.render import at, thousands
from gateway.services.activity import Throughput
from sdk.wire import Attempt, AttemptOutcome, LogLine, Task, TaskState

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


def test_counts_get_thousands_separators_and_times_a_time_element() -> None:
    assert thousands(0) == "0"
    assert thousands(1234567) == "1,234,567"
    assert thousands(None) == "-"
    html = str(at(T0))
    assert html == (
        '<time datetime="2030-01-01T12:00:00+00:00" title="2030-01-01 12:00:00 UTC">'
        "2030-01-01 12:00:00 UTC</time>"
    )


def line(seconds: int) -> LogLine:
    return LogLine(message=f"at {seconds}", at=T0 + timedelta(seconds=seconds))


def running(attempt: int, started: int, attempts: list[Attempt]) -> Task:
    """A task running its push ``attempt`` since ``started`` seconds after T0."""
    return Task(
        id="01J0000000000000000000000A",
        queue="q",
        name="t",
        state=TaskState.RUNNING,
        attempt=attempt,
        max_attempts=5,
        created_at=T0,
        run_at=T0,
        started_at=T0 + timedelta(seconds=started),
        attempts=attempts,
    )


def test_log_lines_are_grouped_by_the_attempt_whose_time_they_fall_in() -> None:
    attempts = [
        Attempt(
            number=n,
            started_at=T0 + timedelta(seconds=10 * n),
            ended_at=T0 + timedelta(seconds=10 * n + 5),
            outcome=AttemptOutcome.ERROR,
        )
        for n in (1, 2)
    ]
    task = running(3, 30, attempts)
    groups = by_attempt(task, [line(1), line(11), line(19), line(21), line(31), line(32)])
    assert [(g.attempt, g.running, len(g.lines)) for g in groups] == [
        (0, False, 1),
        (1, False, 2),
        (2, False, 1),
        (3, True, 2),
    ]


def test_the_push_running_after_a_sleep_is_its_own_group_marked_running() -> None:
    # The sleep released attempt 1 without spending it: the push running now is attempt 1 again.
    slept = Attempt(
        number=1,
        started_at=T0 + timedelta(seconds=10),
        ended_at=T0 + timedelta(seconds=12),
        outcome=AttemptOutcome.RELEASED,
    )
    task = running(1, 20, [slept])
    groups = by_attempt(task, [line(11), line(21), line(22)])
    assert [(g.attempt, g.running, len(g.lines)) for g in groups] == [
        (1, False, 1),
        (1, True, 2),
    ]


def test_the_hour_chart_stacks_failures_on_successes_scaled_to_the_busiest_minute() -> None:
    zeros = [0] * 60
    succeeded = [*zeros[:58], 30, 1]
    failed = [*zeros[:58], 10, 0]
    chart = hour_chart(
        Throughput(
            queue="q",
            window_seconds=60,
            until=T0,
            finished={
                TaskState.SUCCEEDED: succeeded,
                TaskState.FAILED: failed,
                TaskState.DEAD: [*zeros[:59], 2],
                TaskState.CANCELLED: zeros,
            },
        )
    )
    assert (chart.top, chart.succeeded, chart.failed) == (40, 31, 12)
    busiest, last = chart.bars[58], chart.bars[59]
    assert busiest.ok_height + busiest.bad_height == HEIGHT
    assert (busiest.succeeded, busiest.failed, busiest.minutes_ago) == (30, 10, 2)
    assert (last.ok_height, last.bad_height) == (2, 3)  # 1 and 2 of 40, at least a pixel
    assert chart.bars[0].ok_height == chart.bars[0].bad_height == 0
