"""The loop behind job firing and completion callback delivery: it steps when woken, sleeps
while nothing is due, stops on request even while asleep, and retries a failed turn soon."""

from __future__ import annotations

import asyncio
import itertools
import time

from gateway.background.due_loop import DueLoop
from gateway.core.backoff import LOOP_RETRY_CAP
from gateway.store.clock import ManualClock


async def test_it_sleeps_while_nothing_is_due_steps_when_woken_and_stops() -> None:
    steps: list[int] = []
    stepped = asyncio.Event()
    reads = 0

    async def step() -> bool:
        steps.append(len(steps))
        stepped.set()
        return True

    async def earliest() -> int | None:
        nonlocal reads
        reads += 1
        return None  # nothing due: sleep up to max_sleep

    loop = DueLoop("thing", step, earliest, ManualClock(), interval=0, max_sleep=3600)
    running = asyncio.create_task(loop.run())
    await asyncio.wait_for(stepped.wait(), 5)
    stepped.clear()
    await asyncio.sleep(0.05)
    assert (steps, reads) == ([0], 1)  # asleep: no step, no read
    loop.notice(0)
    await asyncio.wait_for(stepped.wait(), 5)
    assert steps == [0, 1]
    loop.stop()
    await asyncio.wait_for(running, 5)  # returns from its long sleep at once


async def test_a_due_time_ahead_is_slept_until() -> None:
    clock = ManualClock()
    stepped = asyncio.Event()

    async def step() -> bool:
        stepped.set()
        return True

    async def earliest() -> int | None:
        return clock.now_ms() + 30  # due 30 ms from now

    loop = DueLoop("thing", step, earliest, clock, interval=0, max_sleep=3600)
    running = asyncio.create_task(loop.run())
    await asyncio.wait_for(stepped.wait(), 5)
    stepped.clear()
    await asyncio.wait_for(stepped.wait(), 5)  # stepped again by itself, without a notice
    loop.stop()
    await asyncio.wait_for(running, 5)


async def test_a_failed_turn_is_tried_again_soon_and_the_loop_is_stalled_until_one_works() -> None:
    # The step fails three times (Redis down), then works. Nothing is ever due, so a loop that
    # slept after a failure (up to max_sleep, an hour here) would never step again by itself.
    results = [False, False, False, True]
    steps: list[float] = []
    stalled: list[bool] = []
    worked = asyncio.Event()

    async def step() -> bool:
        stalled.append(loop.stalled)
        steps.append(time.monotonic())
        ok = results[len(steps) - 1]
        if ok:
            worked.set()
        return ok

    async def earliest() -> int | None:
        return None

    loop = DueLoop("thing", step, earliest, ManualClock(), interval=0.01, max_sleep=3600)
    running = asyncio.create_task(loop.run())
    await asyncio.wait_for(worked.wait(), 5)
    assert stalled == [False, True, True, True]  # from the first failure until one works
    await asyncio.sleep(0)  # the loop records the turn that worked
    assert not loop.stalled
    gaps = [b - a for a, b in itertools.pairwise(steps)]
    assert all(gap < LOOP_RETRY_CAP + 1.0 for gap in gaps), gaps  # never max_sleep
    loop.stop()
    await asyncio.wait_for(running, 5)


async def test_a_failed_due_read_is_a_failed_turn_and_a_notice_ends_the_retry_wait() -> None:
    reads = 0
    stepped = asyncio.Event()
    failed = asyncio.Event()

    async def step() -> bool:
        stepped.set()
        return True

    async def earliest() -> int | None:
        nonlocal reads
        reads += 1
        if reads == 1:
            failed.set()
            raise ConnectionError("Redis is down")
        return None

    # An interval of an hour: the retry would wait that long (a loop never turns faster than
    # its interval), so only the notice can bring the next step.
    loop = DueLoop("thing", step, earliest, ManualClock(), interval=3600, max_sleep=3600)
    running = asyncio.create_task(loop.run())
    await asyncio.wait_for(failed.wait(), 5)
    stepped.clear()
    assert loop.stalled
    loop.notice(0)  # the pub/sub connection is back
    await asyncio.wait_for(stepped.wait(), 5)
    loop.stop()
    await asyncio.wait_for(running, 5)
    assert not loop.stalled
