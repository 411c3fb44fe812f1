"""Issues 20's and 32's targets, each marked met or not from one ``bench/peers.py`` run's figures.

A target reads either Jobgate's ratio to the best peer (the median of the per-run ratios,
``Results.ratio``) or Jobgate's own median, and compares it with a bound. A target whose figure
was not measured in this invocation (a race, a process count or a system left out) says so
instead of passing or failing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bench.peers_metrics import (
    ANSWER_P50,
    BATCHED,
    BATCHES_500,
    DELAY,
    ENQUEUE,
    IMPORT,
    IMPORT_SDK,
    ONE,
    P50,
    P99,
    PLAIN_POST,
    QUEUED,
    SINGLE,
    cpu_metric,
    drain_metric,
    enqueue_cpu_metric,
    single_in_flight,
)
from bench.peers_report import Metric, Results, number, times

PAYLOAD_BYTES = 0  # the no-op task is enqueued without a payload
MEMORY_ALLOWANCE = 300  # bytes per queued task above its payload
X = "\u00d7"  # the multiplication sign


@dataclass(frozen=True)
class Target:
    """``system``'s ratio to the best peer (``ratio=True``) or median, at least or at most
    ``bound``."""

    text: str
    metric: Metric
    system: str
    bound: float
    at_least: bool
    ratio: bool

    def figure(self, results: Results) -> float | None:
        if self.ratio:
            return results.ratio(self.metric, self.system)
        return results.median(self.metric, self.system)

    def met(self, results: Results) -> bool | None:
        found = self.figure(results)
        if found is None:
            return None
        return found >= self.bound if self.at_least else found <= self.bound

    def shown(self, results: Results) -> str:
        found = self.figure(results)
        if self.ratio:
            return times(found)
        return "—" if found is None else f"{number(found)} {self.metric.unit}"


def targets(processes: Sequence[int], in_flight: int) -> list[Target]:
    """Issues 20's and 32's targets for the process counts run; the first count's figures stand
    for the ones measured at one count only (enqueue, latency, memory, Redis CPU)."""
    first = processes[0]
    found = [
        Target(
            f"(a) drain ≥ 2{X} the fastest peer, {n} process(es)",
            drain_metric("python", n),
            BATCHED,
            2.0,
            True,
            True,
        )
        for n in processes
    ]
    found += [
        Target(
            f"(b) drain ≥ 1.5{X} the fastest HTTP-calling peer, {n} process(es)",
            drain_metric("http", n),
            ONE,
            1.5,
            True,
            True,
        )
        for n in processes
    ]
    found += [
        Target(
            f"single enqueues, {in_flight} in flight, ≥ 1{X} the fastest peer's enqueue rate",
            ENQUEUE,
            single_in_flight(in_flight),
            1.0,
            True,
            True,
        ),
        Target("batch enqueue ≥ 25,000 tasks/s", ENQUEUE, BATCHES_500, 25_000, True, False),
        Target("enqueue to start, idle, p50 ≤ 1.5 ms", P50, ONE, 1.5, False, False),
        Target("enqueue to start, idle, p99 ≤ 5 ms", P99, ONE, 5.0, False, False),
        Target("enqueue to start, idle, p50 ≤ the best peer's", P50, ONE, 1.0, False, True),
        *(
            Target(
                f"the enqueue's answer, {how}, idle, p50 ≤ the fastest peer's enqueue call",
                ANSWER_P50,
                system,
                1.0,
                False,
                True,
            )
            for how, system in ((".delay()", DELAY), ("plain HTTP POST", PLAIN_POST))
        ),
        Target(
            f"(a) Redis CPU per task ≤ 0.5{X} the leanest peer's, {first} process(es)",
            cpu_metric("python", "redis", first),
            BATCHED,
            0.5,
            False,
            True,
        ),
        Target(
            f"(b) Redis CPU per task ≤ 0.5{X} the leanest peer's, {first} process(es)",
            cpu_metric("http", "redis", first),
            ONE,
            0.5,
            False,
            True,
        ),
        Target(
            f"memory per queued task ≤ payload + {MEMORY_ALLOWANCE} bytes "
            f"(no-op: {PAYLOAD_BYTES + MEMORY_ALLOWANCE})",
            QUEUED,
            BATCHED,
            PAYLOAD_BYTES + MEMORY_ALLOWANCE,
            False,
            False,
        ),
        Target(
            "gateway CPU per single enqueue ≤ 150 µs",
            enqueue_cpu_metric("gateway"),
            SINGLE,
            150.0,
            False,
            False,
        ),
        Target("`import sdk` ≤ 0.3 s", IMPORT, IMPORT_SDK, 0.3, False, False),
    ]
    return found


def target_table(results: Results, found: Sequence[Target]) -> list[str]:
    """Markdown: each target, Jobgate's figure, and met / not met (or not measured)."""
    lines = ["| target | Jobgate | met |", "| --- | --: | --- |"]
    for target in found:
        met = target.met(results)
        verdict = "not measured" if met is None else ("met" if met else "**not met**")
        lines.append(f"| {target.text} | {target.shown(results)} | {verdict} |")
    lines.append("")
    return lines


def backlog_note(results: Results, in_flight: int, rate: float) -> list[str]:
    """A warning when the latency run's arrivals came near Jobgate's single-enqueue rate: then
    enqueue to start measures a queue of arrivals waiting in the producer and gateway, not the
    dispatch (seen at a load average of 20, where single enqueues ran at 264/s)."""
    found = results.median(ENQUEUE, single_in_flight(in_flight))
    if found is None or found >= 2 * rate:
        return []
    return [
        f"Note: Jobgate's single enqueues ran at {number(found)}/s with {in_flight} in flight, "
        f"under twice the latency run's {rate:g} arrivals/s, so its enqueue-to-start figures "
        "include arrivals queued behind each other, not only the dispatch; a lower `--rate` "
        "measures the dispatch alone.",
        "",
    ]
