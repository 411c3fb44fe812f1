"""Figures of the peers comparison, and the Markdown tables made from them.

Pure code (no processes, no Redis), so it is unit-tested on its own. A figure is one value of a
metric for one system in one run. On a noisy shared machine absolute figures move by 2 times between
runs while ratios taken within one run hardly move, so every ratio here is taken inside a run
(Jobgate's figure ÷ the best peer's figure of the same run) and the median of those per-run
ratios is what is reported, beside the median of each system's figures.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field

JOBGATE = "Jobgate"


@dataclass(frozen=True)
class Metric:
    """What is measured; ``higher_is_better`` picks the best peer (fastest or leanest)."""

    name: str
    unit: str
    higher_is_better: bool = True

    @property
    def title(self) -> str:
        better = "higher" if self.higher_is_better else "lower"
        return f"{self.name} ({self.unit}, {better} is better)"


def is_peer(system: str) -> bool:
    """Jobgate's variants are named ``Jobgate, ...``; every other system is a peer."""
    return not system.startswith(JOBGATE)


@dataclass
class Results:
    """Figures by metric, then system, then run number; metrics and systems keep their order."""

    figures: dict[Metric, dict[str, dict[int, float]]] = field(default_factory=dict)

    def record(self, metric: Metric, system: str, run: int, value: float) -> None:
        self.figures.setdefault(metric, {}).setdefault(system, {})[run] = value

    def metrics(self) -> list[Metric]:
        return list(self.figures)

    def systems(self, metric: Metric) -> list[str]:
        return list(self.figures.get(metric, {}))

    def runs(self, metric: Metric, system: str) -> list[float]:
        by_run = self.figures.get(metric, {}).get(system, {})
        return [by_run[run] for run in sorted(by_run)]

    def median(self, metric: Metric, system: str) -> float | None:
        values = self.runs(metric, system)
        return statistics.median(values) if values else None

    def best_peer(self, metric: Metric, run: int) -> tuple[str, float] | None:
        """The peer with the best figure in one run, or None if no peer has one."""
        found = [
            (system, by_run[run])
            for system, by_run in self.figures.get(metric, {}).items()
            if is_peer(system) and run in by_run
        ]
        if not found:
            return None
        pick = max if metric.higher_is_better else min
        return pick(found, key=lambda item: item[1])

    def ratios(self, metric: Metric, system: str) -> list[float]:
        """``system`` ÷ best peer, one per run that has both (runs where the peer is 0 skipped)."""
        found = []
        for run, value in sorted(self.figures.get(metric, {}).get(system, {}).items()):
            best = self.best_peer(metric, run)
            if best is not None and best[1] != 0:
                found.append(value / best[1])
        return found

    def ratio(self, metric: Metric, system: str) -> float | None:
        """Median of the per-run ratios of ``system`` to the best peer."""
        found = self.ratios(metric, system)
        return statistics.median(found) if found else None


def number(value: float | None) -> str:
    """Figures as a reader wants them: thousands separated, few digits, dash when missing."""
    if value is None:
        return "—"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:,.1f}"
    return f"{value:,.2f}"


def times(value: float | None) -> str:
    return "—" if value is None else f"{value:,.2f}\u00d7"  # the multiplication sign


def metric_table(results: Results, metric: Metric) -> list[str]:
    """One metric: each system's median and runs, and Jobgate's ratios to the best peer."""
    lines = [
        f"##### {metric.title}",
        "",
        "| system | median | runs | ÷ best peer (median of per-run ratios) |",
        "| --- | --: | --- | --: |",
    ]
    for system in results.systems(metric):
        runs = ", ".join(number(v) for v in results.runs(metric, system))
        ratio = "" if is_peer(system) else times(results.ratio(metric, system))
        lines.append(f"| {system} | {number(results.median(metric, system))} | {runs} | {ratio} |")
    lines.append("")
    return lines


def summary_table(results: Results, metrics: Iterable[Metric]) -> list[str]:
    """One line per metric and Jobgate variant: the ratio that counts, with the figures."""
    lines = [
        "| metric | Jobgate variant | Jobgate (median) | best peer (median) "
        "| Jobgate ÷ best peer |",
        "| --- | --- | --: | --: | --: |",
    ]
    for metric in metrics:
        peers = [s for s in results.systems(metric) if is_peer(s)]
        medians = {s: results.median(metric, s) for s in peers}
        known = {s: v for s, v in medians.items() if v is not None}
        best = ""
        if known:
            pick = max if metric.higher_is_better else min
            name = pick(known, key=lambda s: known[s])
            best = f"{number(known[name])} ({name})"
        for system in results.systems(metric):
            if is_peer(system):
                continue
            variant = system.removeprefix(f"{JOBGATE}, ")
            lines.append(
                f"| {metric.title} | {variant} | {number(results.median(metric, system))} "
                f"| {best} | {times(results.ratio(metric, system))} |"
            )
    lines.append("")
    return lines


def scaling_table(results: Results, drains: dict[int, Metric]) -> list[str]:
    """The drain rate against the process count, one column per system (medians)."""
    systems: list[str] = []
    for metric in drains.values():
        systems += [s for s in results.systems(metric) if s not in systems]
    lines = [
        "| processes | "
        + " | ".join(systems)
        + " | "
        + " | ".join(
            f"{s.removeprefix(f'{JOBGATE}, ')} ÷ best peer" for s in systems if not is_peer(s)
        )
        + " |",
        "| --: | "
        + " | ".join("--:" for _ in systems)
        + " | "
        + " | ".join("--:" for s in systems if not is_peer(s))
        + " |",
    ]
    for processes, metric in drains.items():
        cells = [number(results.median(metric, s)) for s in systems]
        cells += [times(results.ratio(metric, s)) for s in systems if not is_peer(s)]
        lines.append(f"| {processes} | " + " | ".join(cells) + " |")
    lines.append("")
    return lines


def percentile(values: Iterable[float], fraction: float) -> float:
    """Nearest-rank percentile, taken as bench/e2e.py takes its p99."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("no values")
    return ordered[min(len(ordered) - 1, round(fraction * len(ordered)))]
