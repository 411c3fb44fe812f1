"""Retry delays: every strategy, the cap, jitter bounds and the worker-requested delay."""

from __future__ import annotations

import math
import random

import pytest

from gateway.core.backoff import (
    LOOP_RETRY_CAP,
    MAX_REQUESTED_DELAY,
    compute_backoff,
    loop_retry_delay,
    retry_delay_ms,
)
from sdk.wire import Backoff, BackoffStrategy


def policy(strategy: BackoffStrategy, base: float = 2.0, cap: float = 300.0) -> Backoff:
    return Backoff(strategy=strategy, base_delay=base, max_delay=cap)


@pytest.fixture
def rng() -> random.Random:
    return random.Random(1234)


@pytest.mark.parametrize(
    ("strategy", "expected"),
    [
        (BackoffStrategy.CONSTANT, [2.0, 2.0, 2.0, 2.0, 2.0]),
        (BackoffStrategy.LINEAR, [2.0, 4.0, 6.0, 8.0, 10.0]),
        (BackoffStrategy.EXPONENTIAL, [2.0, 4.0, 8.0, 16.0, 32.0]),
    ],
)
def test_deterministic_strategies(
    strategy: BackoffStrategy, expected: list[float], rng: random.Random
) -> None:
    got = [compute_backoff(n, policy(strategy), rng) for n in range(1, 6)]
    assert got == expected


@pytest.mark.parametrize("strategy", list(BackoffStrategy))
def test_every_strategy_is_capped_at_max_delay(
    strategy: BackoffStrategy, rng: random.Random
) -> None:
    backoff = policy(strategy, base=10.0, cap=10.0 if strategy is BackoffStrategy.CONSTANT else 45)
    for n in (1, 5, 10, 100, 1075, 10_000, 10**400):
        delay = compute_backoff(n, backoff, rng)
        assert 0.0 <= delay <= backoff.max_delay
    if strategy is not BackoffStrategy.EXPONENTIAL_JITTER:
        assert compute_backoff(10**400, backoff, rng) == backoff.max_delay


def test_the_cap_bites_exactly_where_the_strategy_passes_it(rng: random.Random) -> None:
    exp = policy(BackoffStrategy.EXPONENTIAL, base=1.0, cap=20.0)
    assert [compute_backoff(n, exp, rng) for n in range(4, 8)] == [8.0, 16.0, 20.0, 20.0]
    lin = policy(BackoffStrategy.LINEAR, base=3.0, cap=10.0)
    assert [compute_backoff(n, lin, rng) for n in range(2, 6)] == [6.0, 9.0, 10.0, 10.0]


def test_failures_below_one_count_as_the_first(rng: random.Random) -> None:
    for strategy in (BackoffStrategy.LINEAR, BackoffStrategy.EXPONENTIAL):
        assert compute_backoff(0, policy(strategy), rng) == 2.0
        assert compute_backoff(-3, policy(strategy), rng) == 2.0


def test_zero_base_means_no_delay_even_for_huge_attempts(rng: random.Random) -> None:
    for strategy in BackoffStrategy:
        assert compute_backoff(10**400, policy(strategy, base=0.0, cap=0.0), rng) == 0.0


def test_full_jitter_stays_within_the_capped_exponential() -> None:
    rng = random.Random(42)
    backoff = policy(BackoffStrategy.EXPONENTIAL_JITTER, base=1.0, cap=30.0)
    for n in range(1, 9):
        ceiling = min(2.0 ** (n - 1), 30.0)
        draws = [compute_backoff(n, backoff, rng) for _ in range(2000)]
        assert all(0.0 <= d <= ceiling for d in draws)
        # Full jitter spreads over the whole range, not only near its top.
        assert min(draws) < 0.05 * ceiling
        assert max(draws) > 0.95 * ceiling
        assert math.isclose(sum(draws) / len(draws), ceiling / 2, rel_tol=0.05)


def test_jitter_is_reproducible_with_a_seeded_rng() -> None:
    backoff = policy(BackoffStrategy.EXPONENTIAL_JITTER)
    first = [compute_backoff(n, backoff, random.Random(7)) for n in range(1, 10)]
    again = [compute_backoff(n, backoff, random.Random(7)) for n in range(1, 10)]
    assert first == again


def test_only_the_jittered_strategy_draws_from_the_rng() -> None:
    rng = random.Random(5)
    state = rng.getstate()
    for strategy in (
        BackoffStrategy.CONSTANT,
        BackoffStrategy.LINEAR,
        BackoffStrategy.EXPONENTIAL,
    ):
        compute_backoff(3, policy(strategy), rng)
    assert rng.getstate() == state


def test_retry_delay_ms_rounds_the_backoff_to_milliseconds(rng: random.Random) -> None:
    lin = policy(BackoffStrategy.LINEAR, base=0.3)
    assert retry_delay_ms(3, lin, rng) == 900  # 0.3 * 3 is 0.8999999999999999 in floats
    assert retry_delay_ms(3, policy(BackoffStrategy.EXPONENTIAL, base=0.25), rng) == 1000


def test_a_requested_delay_wins_over_the_policy(rng: random.Random) -> None:
    backoff = policy(BackoffStrategy.EXPONENTIAL, base=10.0, cap=60.0)
    # Shorter than the base and longer than the cap are both honoured.
    assert retry_delay_ms(1, backoff, rng, requested=0.5) == 500
    assert retry_delay_ms(1, backoff, rng, requested=3600.0) == 3_600_000
    assert retry_delay_ms(1, backoff, rng, requested=0.0) == 0


def test_a_requested_delay_is_capped_at_a_day_and_never_negative(rng: random.Random) -> None:
    backoff = policy(BackoffStrategy.CONSTANT)
    day_ms = round(MAX_REQUESTED_DELAY * 1000)
    assert day_ms == 86_400_000
    assert retry_delay_ms(1, backoff, rng, requested=10 * 86_400.0) == day_ms
    assert retry_delay_ms(1, backoff, rng, requested=math.inf) == day_ms
    assert retry_delay_ms(1, backoff, rng, requested=-5.0) == 0


def test_a_requested_delay_that_is_not_a_number_is_ignored(rng: random.Random) -> None:
    backoff = policy(BackoffStrategy.CONSTANT, base=3.0)
    assert retry_delay_ms(4, backoff, rng, requested=math.nan) == 3000
    assert retry_delay_ms(4, backoff, rng, requested=None) == 3000


def test_a_loop_retries_from_its_interval_doubling_up_to_half_a_second() -> None:
    assert [loop_retry_delay(0.1, n) for n in range(1, 6)] == [0.1, 0.2, 0.4, 0.5, 0.5]
    assert loop_retry_delay(0, 1) == 0.05  # never a busy loop
    assert loop_retry_delay(0.25, 1000) == LOOP_RETRY_CAP == 0.5  # no overflow, capped
    assert loop_retry_delay(5.0, 3) == 5.0  # never faster than the loop's own interval
