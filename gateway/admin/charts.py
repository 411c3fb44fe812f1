"""The small SVG charts of the admin UI, as numbers the templates draw (no JavaScript)."""

from __future__ import annotations

from dataclasses import dataclass

from gateway.services.activity import Throughput
from sdk.wire import TaskState

HOUR_WINDOWS = 60  # one bar a minute over the last hour
BAR, GAP, HEIGHT = 4, 1, 60  # SVG units


@dataclass(frozen=True, slots=True)
class StackedBar:
    """One minute: succeeded at the bottom, failed or dead above, in SVG units."""

    x: int
    ok_height: int
    bad_height: int
    succeeded: int
    failed: int
    minutes_ago: int


@dataclass(frozen=True, slots=True)
class HourChart:
    bars: tuple[StackedBar, ...]
    top: int  # the busiest minute's tasks, the chart's full height
    succeeded: int
    failed: int
    width: int = HOUR_WINDOWS * (BAR + GAP)
    height: int = HEIGHT


def hour_chart(throughput: Throughput) -> HourChart:
    """Tasks that succeeded and that failed (or died) per minute, scaled to the busiest one."""
    ok = throughput.finished[TaskState.SUCCEEDED]
    bad = [
        f + d
        for f, d in zip(
            throughput.finished[TaskState.FAILED], throughput.finished[TaskState.DEAD], strict=True
        )
    ]
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
        )
        for i, (s, f) in enumerate(zip(ok, bad, strict=True))
    )
    return HourChart(bars, top, sum(ok), sum(bad))
