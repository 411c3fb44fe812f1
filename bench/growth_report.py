"""bench/growth.py's arithmetic and tables: per-run cost ratios, their medians, the targets.

Pure code (tests/unit/test_bench_growth.py). A *cost ratio* is how much dearer the loaded
system is than its baseline in the same run: loaded ÷ baseline for a cost (CPU per task, a
latency, commands/s), baseline ÷ loaded for a rate (the drain), so above 1 is always worse.
The figure reported is the median of the per-run ratios, never a ratio of medians (each run's
pair was measured side by side, alternated; runs apart are not comparable).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

TARGET = 1.5
"""Issue 32, item 4: each cost at most this many times its one-queue baseline."""

Runs = Sequence[Mapping[str, float]]


@dataclass(frozen=True, slots=True)
class Measure:
    """One figure a system yields: its key in a run's figures, its unit, whether more is
    better (a rate), and whether it counts toward the ≤ 1.5x target (the idle figures are
    near zero on both sides, where a ratio says little, and the commands per task explain
    the costs rather than being one: they are shown, not judged)."""

    key: str
    unit: str
    higher_is_better: bool = False
    judged: bool = True


DRAIN = Measure("drain", "tasks/s", higher_is_better=True)
GATEWAY_CPU = Measure("gateway CPU per task", "µs")
REDIS_CPU = Measure("Redis CPU per task", "µs")
P50 = Measure("enqueue to start p50", "ms")
P99 = Measure("enqueue to start p99", "ms")
COMMANDS = Measure("Redis commands per task", "", judged=False)
IDLE_CPU = Measure("idle gateway CPU", "% of a core", judged=False)
IDLE_COMMANDS = Measure("idle Redis commands", "per s", judged=False)
MEASURES = (DRAIN, GATEWAY_CPU, REDIS_CPU, P50, P99, COMMANDS, IDLE_CPU, IDLE_COMMANDS)


def cost_ratio(measure: Measure, baseline: float, loaded: float) -> float:
    """How many times dearer ``loaded`` is than ``baseline`` (1.0 when both are 0; infinite
    when only the baseline is)."""
    worse, better = (baseline, loaded) if measure.higher_is_better else (loaded, baseline)
    if better == 0:
        return 1.0 if worse == 0 else math.inf
    return worse / better


def median_ratio(measure: Measure, baseline: Runs, loaded: Runs) -> float:
    """The median of the per-run cost ratios, run i's baseline against run i's loaded."""
    if len(baseline) != len(loaded) or not baseline:
        raise ValueError("one baseline and one loaded system per run")
    return statistics.median(
        cost_ratio(measure, b[measure.key], lo[measure.key])
        for b, lo in zip(baseline, loaded, strict=True)
    )


@dataclass(frozen=True, slots=True)
class Case:
    """One growth case: what its loaded system holds beside the baseline's."""

    name: str
    baseline: str
    loaded: str


def present(runs: Runs) -> list[Measure]:
    """The measures every run has, in the order of :data:`MEASURES`."""
    return [m for m in MEASURES if runs and all(m.key in run for run in runs)]


def _label(measure: Measure) -> str:
    return f"{measure.key} ({measure.unit})" if measure.unit else measure.key


def _figure(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.2f}"


def case_table(case: Case, baseline: Runs, loaded: Runs) -> str:
    """Markdown: each measure's median on both sides, every run's ratio and their median."""
    lines = [
        f"| {case.name} | {case.baseline} | {case.loaded} | ratio (runs) | cost ratio |",
        "| --- | --: | --: | --- | --: |",
    ]
    for m in present(baseline):
        runs = ", ".join(
            f"{cost_ratio(m, b[m.key], lo[m.key]):.2f}"
            for b, lo in zip(baseline, loaded, strict=True)
        )
        base = statistics.median(run[m.key] for run in baseline)
        load = statistics.median(run[m.key] for run in loaded)
        ratio = median_ratio(m, baseline, loaded)
        lines.append(f"| {_label(m)} | {_figure(base)} | {_figure(load)} | {runs} | {ratio:.2f}x |")
    return "\n".join(lines)


def verdict(case: Case, baseline: Runs, loaded: Runs) -> tuple[str, bool]:
    """The judged ratios of one case as one phrase, and whether all are within the target."""
    judged = [m for m in present(baseline) if m.judged]
    ratios = {m.key: median_ratio(m, baseline, loaded) for m in judged}
    text = ", ".join(f"{key} {ratio:.2f}x" for key, ratio in ratios.items())
    return text, all(ratio <= TARGET for ratio in ratios.values())


def targets_table(results: Mapping[Case, tuple[Runs, Runs]]) -> str:
    """Markdown: one row per case, the target met or not."""
    lines = [
        f"| target (issue 32, item 4: ≤ {TARGET}x the baseline) | cost ratios (medians) | met |",
        "| --- | --- | --- |",
    ]
    for case, (baseline, loaded) in results.items():
        text, met = verdict(case, baseline, loaded)
        worst = [
            m.key
            for m in present(baseline)
            if m.judged and median_ratio(m, baseline, loaded) > TARGET
        ]
        mark = "met" if met else f"**not met** ({', '.join(worst)})"
        lines.append(f"| {case.loaded} ÷ {case.baseline} | {text} | {mark} |")
    return "\n".join(lines)
