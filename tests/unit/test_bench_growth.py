"""bench/growth.py's arithmetic and tables, without running any system.

The measurement starts Redis, a gateway and a worker per system for minutes, which the suite
cannot afford; what can silently go wrong without it is the direction of a ratio (a rate
against a cost), the median taken over per-run ratios rather than over figures, and the
verdict on the target.
"""

from __future__ import annotations

import math

import pytest

from bench.growth_report import (
    DRAIN,
    GATEWAY_CPU,
    IDLE_COMMANDS,
    P99,
    TARGET,
    Case,
    case_table,
    cost_ratio,
    median_ratio,
    targets_table,
    verdict,
)

CASE = Case("1,000 busy queues", "1 queue", "1,000 queues")


def run(
    drain: float, gateway: float, p99: float, commands: float | None = None
) -> dict[str, float]:
    figures = {DRAIN.key: drain, GATEWAY_CPU.key: gateway, P99.key: p99}
    if commands is not None:
        figures[IDLE_COMMANDS.key] = commands
    return figures


def test_a_slower_drain_and_a_dearer_task_are_both_ratios_above_one() -> None:
    assert cost_ratio(DRAIN, 3000, 2000) == 1.5
    assert cost_ratio(GATEWAY_CPU, 200, 300) == 1.5
    assert cost_ratio(DRAIN, 2000, 3000) == pytest.approx(2 / 3)


def test_zero_on_both_sides_is_no_growth_and_zero_against_something_is_infinite() -> None:
    assert cost_ratio(IDLE_COMMANDS, 0, 0) == 1.0
    assert cost_ratio(IDLE_COMMANDS, 0, 2) == math.inf
    assert cost_ratio(DRAIN, 100, 0) == math.inf


def test_the_median_is_of_per_run_ratios_not_a_ratio_of_medians() -> None:
    baseline = [run(1000, 100, 5), run(3000, 300, 5), run(2000, 200, 5)]
    loaded = [run(1000, 110, 5), run(1000, 330, 5), run(1500, 220, 5)]
    # Drain per run: 1.0, 3.0, 1.33 -> 1.33, where the medians' ratio would be 2000 / 1000.
    assert median_ratio(DRAIN, baseline, loaded) == pytest.approx(4 / 3)
    assert median_ratio(GATEWAY_CPU, baseline, loaded) == pytest.approx(1.1)


def test_runs_must_pair_up() -> None:
    with pytest.raises(ValueError, match="per run"):
        median_ratio(DRAIN, [run(1, 1, 1)], [])


def test_the_verdict_judges_drain_and_latency_but_not_the_idle_figures() -> None:
    baseline = [run(1000, 100, 5, commands=0.5)]
    within = [run(800, 140, 7, commands=5.0)]  # idle commands 10x: shown, not judged
    text, met = verdict(CASE, baseline, within)
    assert met
    assert "idle" not in text
    _, met = verdict(CASE, baseline, [run(1000, 100, 5 * TARGET + 0.1, commands=0.5)])
    assert not met


def test_the_tables_name_every_measure_and_what_missed() -> None:
    baseline = [run(1000, 100, 5, commands=1.0)]
    loaded = [run(400, 100, 5, commands=1.0)]
    table = case_table(CASE, baseline, loaded)
    assert "| drain (tasks/s) | 1,000 | 400 | 2.50 | 2.50x |" in table
    assert "idle Redis commands (per s)" in table
    targets = targets_table({CASE: (baseline, loaded)})
    assert "| 1,000 queues ÷ 1 queue |" in targets
    assert "**not met** (drain)" in targets
