"""The small SVG charts of the admin UI, as numbers the templates draw (no JavaScript).

Every chart has a scale: its busiest bar's count at the top of the y axis, 0 at the bottom,
and the span of time under the x axis. Their words use the task states' own names, as the
counters beside them do: "9 succeeded, 1 dead", never "failed" for a dead task.
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.admin.render import thousands
from gateway.services.activity import Throughput
from sdk.wire import TaskState

HOUR_WINDOWS = 60  # one bar a minute over the last hour
BAR, GAP, HEIGHT = 4, 1, 60  # SVG units
AXIS = 30  # SVG units left of the bars, for the y axis's labels
BELOW = 12  # SVG units under the bars, for the x axis's labels
BAD = (TaskState.FAILED, TaskState.DEAD)  # drawn red
ENDED = (TaskState.SUCCEEDED, TaskState.FAILED, TaskState.DEAD, TaskState.CANCELLED)
DRAWN = ENDED[:3]  # the hour chart leaves cancelled tasks out


def ended_text(counts: dict[TaskState, int], states: tuple[TaskState, ...] = ENDED) -> str:
    """``9 succeeded, 1 dead``: succeeded always, each other final state when any ended so."""
    return ", ".join(
        f"{thousands(counts.get(s, 0))} {s.value}"
        for s in states
        if s is TaskState.SUCCEEDED or counts.get(s, 0)
    )


def _window(throughput: Throughput, i: int) -> dict[TaskState, int]:
    return {s: throughput.finished[s][i] for s in ENDED if s in throughput.finished}


def _totals(throughput: Throughput) -> dict[TaskState, int]:
    return {s: throughput.total(s) for s in ENDED if s in throughput.finished}


@dataclass(frozen=True, slots=True)
class Bar:
    """One window of a card's chart, in the chart's SVG units (x from the axis)."""

    x: int
    height: int
    count: int
    failed: int  # failed or dead: the bar is drawn red
    text: str  # what ended in it, for the hover


@dataclass(frozen=True, slots=True)
class Spark:
    """A card's chart: tasks ended per minute, scaled to the busiest minute."""

    bars: list[Bar]
    top: int
    text: str  # what ended over the whole chart
    height: int
    axis: int = AXIS


def spark(throughput: Throughput, *, height: int = 30, width: int = 8) -> Spark:
    """The chart of tasks ended per window, scaled to the busiest window."""
    ended = throughput.ended()
    top = max(ended, default=0)
    bars = []
    for i, n in enumerate(ended):
        window = _window(throughput, i)
        bad = sum(window.get(s, 0) for s in BAD)
        bar_height = max(1 if n else 0, round(n * height / (top or 1)))
        bars.append(Bar(i * (width + 2), bar_height, n, bad, ended_text(window)))
    return Spark(bars, top, ended_text(_totals(throughput)), height)


@dataclass(frozen=True, slots=True)
class StackedBar:
    """One minute: succeeded at the bottom, failed or dead above, in SVG units."""

    x: int
    ok_height: int
    bad_height: int
    succeeded: int
    failed: int  # failed or dead
    minutes_ago: int
    text: str


@dataclass(frozen=True, slots=True)
class HourChart:
    bars: tuple[StackedBar, ...]
    top: int  # the busiest minute's tasks, the chart's full height
    succeeded: int
    failed: int  # failed or dead
    text: str  # what ended over the hour, by state
    width: int = HOUR_WINDOWS * (BAR + GAP)
    height: int = HEIGHT
    axis: int = AXIS
    below: int = BELOW


def hour_chart(throughput: Throughput) -> HourChart:
    """Tasks that succeeded and that failed (or died) per minute, scaled to the busiest one."""
    ok = throughput.finished[TaskState.SUCCEEDED]
    bad = [sum(throughput.finished[s][i] for s in BAD) for i in range(len(ok))]
    top = max((a + b for a, b in zip(ok, bad, strict=True)), default=0)
    scale = HEIGHT / top if top else 0
    n = len(ok)
    bars = tuple(
        StackedBar(
            i * (BAR + GAP),
            max(1 if s else 0, round(s * scale)),
            max(1 if f else 0, round(f * scale)),
            s,
            f,
            n - i,
            ended_text(_window(throughput, i), DRAWN),
        )
        for i, (s, f) in enumerate(zip(ok, bad, strict=True))
    )
    return HourChart(bars, top, sum(ok), sum(bad), ended_text(_totals(throughput), DRAWN))
