"""The loop behind job firing and completion callback delivery: it steps when woken, sleeps
while nothing is due, and stops on request even while asleep."""

from __future__ import annotations

import asyncio

from gateway.clock import ManualClock
from gateway.due_loop import DueLoop


async def test_it_sleeps_while_nothing_is_due_steps_when_woken_and_stops() -> None:
    steps: list[int] = []
    stepped = asyncio.Event()
    reads = 0

    async def step() -> None:
        steps.append(len(steps))
        stepped.set()

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

    async def step() -> None:
        stepped.set()

    async def earliest() -> int | None:
        return clock.now_ms() + 30  # due 30 ms from now

    loop = DueLoop("thing", step, earliest, clock, interval=0, max_sleep=3600)
    running = asyncio.create_task(loop.run())
    await asyncio.wait_for(stepped.wait(), 5)
    stepped.clear()
    await asyncio.wait_for(stepped.wait(), 5)  # stepped again by itself, without a notice
    loop.stop()
    await asyncio.wait_for(running, 5)
