"""The dispatcher's one lease watch (gateway/dispatch/lease_watch.py, ``LeaseWatch``, over
gateway/dispatch/deadlines.py): a heap of push deadlines under one timer instead of a timer and
a timeout scope per push. What a real
lease running out does is tested against Redis in tests/integration/test_endpoint_health.py;
here, what the watch must not do: take another cancellation for a lease's end, or grow with the
pushes that ended long before their leases."""

from __future__ import annotations

import asyncio

import pytest

from gateway.dispatch.deadlines import Deadlines
from gateway.dispatch.delivery import Deliverer
from gateway.dispatch.dispatcher import Dispatcher
from gateway.store.clock import ManualClock
from gateway.store.records import Lease

NOW_MS = 1_700_000_000_000


class Expiries:
    """A task store that says every lease ends when ``ends_ms`` says (0: gone)."""

    def __init__(self, ends_ms: int = 0) -> None:
        self.ends_ms = ends_ms
        self.reads = 0

    async def lease_expiries(self, queue: str, keys: list[tuple[str, str]]) -> list[int]:
        self.reads += 1
        return [self.ends_ms for _ in keys]


def lease(expires_ms: int) -> Lease:
    return Lease("q", "t1", "e1", "tok", "n", 1, None, "null", None, expires_ms, expires_ms, None)


def dispatcher(store: Expiries) -> Deliverer:
    """The deliverer of a dispatcher (which owns the lease watch) on ``store``."""
    return Dispatcher(store, None, None, ManualClock(NOW_MS))._deliverer  # type: ignore[arg-type]


async def test_a_push_answered_in_time_is_left_alone_and_the_heap_stays_small() -> None:
    store = Expiries()
    watching = dispatcher(store)
    loop = asyncio.get_running_loop()
    for _ in range(2_000):
        answer = loop.create_future()
        answer.set_result("answer")
        assert await watching._within_lease(answer, [lease(NOW_MS + 60_000)]) == "answer"
    # Ended pushes are dropped lazily, and the heap is compacted: it does not hold them all.
    assert len(watching._watch._deadlines) <= 300
    assert store.reads == 0
    watching._watch.close()


async def test_a_push_whose_lease_ran_out_is_cut() -> None:
    store = Expiries(ends_ms=NOW_MS + 100)  # not extended: the lease ends as it was
    watching = dispatcher(store)
    never = asyncio.get_running_loop().create_future()
    assert await watching._within_lease(never, [lease(NOW_MS + 100)]) is None
    assert store.reads == 1
    task = asyncio.current_task()
    assert task is not None
    assert task.cancelling() == 0  # the watch's cancellation was undone
    watching._watch.close()


async def test_a_heartbeat_keeps_the_push_watched_until_the_new_end() -> None:
    store = Expiries(ends_ms=NOW_MS + 200)  # extended once, then no more
    watching = dispatcher(store)
    never = asyncio.get_running_loop().create_future()
    clock = watching._clock
    assert isinstance(clock, ManualClock)

    async def move_on() -> None:
        await asyncio.sleep(0.15)
        clock.advance(200)  # the first end passed; the read says NOW + 200, now past too

    mover = asyncio.create_task(move_on())
    assert await watching._within_lease(never, [lease(NOW_MS + 100)]) is None
    assert store.reads == 2
    await mover
    watching._watch.close()


async def test_another_cancellation_of_a_watched_push_is_not_taken_for_the_lease_end() -> None:
    watching = dispatcher(Expiries())
    never = asyncio.get_running_loop().create_future()
    push = asyncio.create_task(watching._within_lease(never, [lease(NOW_MS + 60_000)]))
    await asyncio.sleep(0)
    push.cancel()
    with pytest.raises(asyncio.CancelledError):
        await push
    watching._watch.close()


async def test_a_cancellation_that_comes_with_the_lease_end_still_cancels() -> None:
    """The task is cancelled from outside just as the watch cuts it: the outside cancellation
    wins (as with ``asyncio.timeout``)."""
    store = Expiries()
    watching = dispatcher(store)
    never = asyncio.get_running_loop().create_future()
    push = asyncio.create_task(watching._within_lease(never, [lease(NOW_MS + 50)]))
    await asyncio.sleep(0)
    (_, _, watched) = watching._watch._deadlines._heap[0]
    watched.now()
    push.cancel()
    with pytest.raises(asyncio.CancelledError):
        await push
    watching._watch.close()


def test_deadlines_fire_on_the_loop_that_runs_now() -> None:
    """A timer left on a loop that ended does not hold up the deadlines of the next one."""
    fired: list[str] = []

    class Named:
        def __init__(self, name: str) -> None:
            self.name = name
            self.ended = False

    deadlines = Deadlines[Named](lambda entry: fired.append(entry.name))

    async def wait(name: str, delay: float, linger: float) -> None:
        deadlines.add(delay, Named(name))
        await asyncio.sleep(linger)

    asyncio.run(wait("first", 0.005, 0))  # its timer is left on a closed loop, unfired
    assert fired == []
    asyncio.run(wait("second", 0.02, 0.2))  # due after the first: not earlier, yet armed
    assert "second" in fired
