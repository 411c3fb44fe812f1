"""Retry delays: how long a task waits after a failed attempt before it runs again.

Pure functions, unit-tested on their own. ``failures`` counts the failed attempts of a task so
far, from 1: after the first failure the delay is the strategy's first step.

=====================  ================================================
strategy               delay before the next attempt (seconds)
=====================  ================================================
``constant``           ``base``
``linear``             ``base * n``
``exponential``        ``base * 2 ** (n - 1)``
``exponential_jitter`` ``uniform(0, min(cap, base * 2 ** (n - 1)))``
=====================  ================================================

Every delay is capped at the policy's ``max_delay`` (``cap``). The jittered strategy is AWS's
"full jitter": the cap applies before the draw, so the draw is spread over the whole capped
range rather than piling up at the cap once the exponential outgrows it.

A delay the worker asks for (``Retry-After`` on a 429/503, ``Retry(delay)`` in the SDK, the
``retry_delay`` of an error callback) wins over the policy; see :func:`retry_delay_ms`.

The background loops (dispatcher, recoverer, job firing, completion callbacks) retry a turn that
Redis did not answer after :func:`loop_retry_delay`: short and capped (``LOOP_RETRY_CAP``), so
a Redis that comes back is used again within a second of answering.
"""

from __future__ import annotations

import math
import random

from sdk.wire import Backoff, BackoffStrategy

__all__ = [
    "LOOP_RETRY_CAP",
    "LOOP_RETRY_MIN",
    "MAX_REQUESTED_DELAY",
    "compute_backoff",
    "loop_retry_delay",
    "retry_delay_ms",
]

LOOP_RETRY_MIN = 0.05
"""Seconds before a loop's first retry of a failed turn, when its interval is shorter."""
LOOP_RETRY_CAP = 0.5
"""Longest wait, in seconds, between two tries of a loop whose turns fail (Redis is down)."""


def loop_retry_delay(interval: float, failures: int) -> float:
    """Seconds a background loop waits after its ``failures``-th failed turn in a row:
    ``interval`` (at least ``LOOP_RETRY_MIN``) doubled per failure after the first, at most
    ``LOOP_RETRY_CAP`` (or ``interval`` when that is longer: a loop never turns faster than its
    interval). A Redis that stays down costs one refused connection per cap per loop."""
    first = max(interval, LOOP_RETRY_MIN)
    return min(first * 2.0 ** min(failures - 1, 16), max(LOOP_RETRY_CAP, interval))


MAX_REQUESTED_DELAY = 86_400.0
"""The longest delay a worker may ask for, in seconds (24 hours)."""


def _uncapped(failures: int, backoff: Backoff) -> float:
    """The strategy's delay before the cap; ``inf`` when it is too large for a float."""
    base = backoff.base_delay
    try:
        match backoff.strategy:
            case BackoffStrategy.CONSTANT:
                return base
            case BackoffStrategy.LINEAR:
                return base * failures
            case BackoffStrategy.EXPONENTIAL | BackoffStrategy.EXPONENTIAL_JITTER:
                return base * 2.0 ** (failures - 1)
    except OverflowError:  # an int or a power of two beyond the float range
        return 0.0 if base == 0 else math.inf


def compute_backoff(failures: int, backoff: Backoff, rng: random.Random) -> float:
    """The delay in seconds before the retry that follows ``failures`` failed attempts.

    ``failures`` counts from 1; a smaller value is taken as 1. The result is between 0 and
    ``backoff.max_delay``, for any ``failures`` (no overflow however large it is). ``rng`` is
    drawn from only by ``exponential_jitter``.
    """
    n = max(failures, 1)
    delay = min(_uncapped(n, backoff), backoff.max_delay)
    if backoff.strategy is BackoffStrategy.EXPONENTIAL_JITTER:
        delay = rng.uniform(0.0, delay)
    return min(max(delay, 0.0), backoff.max_delay)


def retry_delay_ms(
    failures: int, backoff: Backoff, rng: random.Random, requested: float | None = None
) -> int:
    """The delay in whole milliseconds before the next attempt, as the finish script takes it.

    The rule: a delay the worker requested (seconds) is honoured as is, even beyond the
    queue's ``max_delay`` or below its ``base_delay`` -- the worker knows best when it can take
    the task again -- but never more than :data:`MAX_REQUESTED_DELAY` (24 hours), and a
    negative request counts as 0 (retry at once). A request that is not a number (NaN) is
    ignored. Without a request, the queue's backoff decides (:func:`compute_backoff`).
    """
    if requested is not None and not math.isnan(requested):
        seconds = min(max(requested, 0.0), MAX_REQUESTED_DELAY)
    else:
        seconds = compute_backoff(failures, backoff, rng)
    return round(seconds * 1000)
