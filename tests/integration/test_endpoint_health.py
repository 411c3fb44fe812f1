"""Endpoint health in the store, one script call at a time with a manual clock: what counts
against an endpoint (only what the gateway observed from it), how the claim chooses among
endpoints (health and the retry's last endpoint), and the dispatcher never waiting for an
answer past the lease."""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import time
from typing import Any

import pytest
from ulid import ULID

from gateway.caches.directory import Directory
from gateway.dispatch.dispatcher import Dispatcher
from gateway.dispatch.lease_watch import lease_budget
from gateway.dispatch.verdict import Answer
from gateway.store.endpoint_records import EndpointHealth, EndpointRecord
from gateway.store.keys import QueueKeys
from gateway.store.records import Lease, NewTask
from gateway.store.tasks import ClaimStatus, Fence, Finish
from sdk.wire import AttemptOutcome, CircuitState, QueuePolicy, TaskState
from tests.support import until

from .conftest import Stores

EXPIRED = AttemptOutcome.EXPIRED
ERROR = AttemptOutcome.ERROR
OK = AttemptOutcome.SUCCEEDED


def task(now: int, priority: int = 0) -> NewTask:
    return NewTask(
        id=str(ULID()),
        name="t",
        payload_json="null",
        priority=priority,
        created_ms=now,
        run_at_ms=now,
    )


async def queue(s: Stores, *concurrency: int, **policy: Any) -> None:
    """Queue ``q`` with endpoints ep0, ep1, ... of the given concurrency (one of 100 by
    default), and a breaker that opens after one failure unless ``policy`` says otherwise."""
    policy.setdefault("circuit_breaker", {"failures": 1, "open_for": 1})
    policy.setdefault("lease_timeout", 10)
    await s.queues.put("q", QueuePolicy.model_validate(policy), s.clock.now_ms())
    for i, limit in enumerate(concurrency or (100,)):
        await add_endpoint(s, i, limit)


async def add_endpoint(s: Stores, i: int, concurrency: int) -> None:
    await s.queues.add_endpoint(
        EndpointRecord(
            id=f"ep{i}",
            queue="q",
            url=f"http://127.0.0.1:{i + 1}/",
            concurrency=concurrency,
            capabilities=[],
            secrets=["whsec_x"],
            created_ms=s.clock.now_ms() + i,
        )
    )


async def claim(s: Stores, n: int = 1, at: int | None = None) -> list[Lease]:
    now = s.clock.now_ms() if at is None else at
    return (await s.tasks.claim("q", n, "seed", now)).leases


async def end(s: Stores, lease: Lease, outcome: AttemptOutcome, at: int, delay: int = 0) -> Any:
    return await s.tasks.finish(
        "q", Finish(lease.task_id, lease.token, outcome, text="null", delay_ms=delay), at
    )


async def health(s: Stores, endpoint: str = "ep0") -> EndpointHealth:
    raw = await s.redis.hget(QueueKeys.of("q").health, endpoint)
    return EndpointHealth.model_validate_json(raw or "{}")


async def record(s: Stores, task_id: str) -> dict[str, Any]:
    found = await s.tasks.record("q", task_id)
    assert found is not None
    return found


# --- what counts against an endpoint -----------------------------------------------------------


async def test_a_lease_that_ran_out_unanswered_counts_for_nothing_and_retries_at_once(
    stores: Stores,
) -> None:
    await queue(stores)
    now = stores.clock.now_ms()
    await stores.tasks.enqueue("q", [task(now)], now)
    (lease,) = await claim(stores)
    # The gateway that pushed it died: nobody recorded an answer, a heartbeat came meanwhile.
    await stores.tasks.heartbeat("q", lease.task_id, lease.token, now + 1_000)
    done = await end(stores, lease, EXPIRED, now + 11_000, delay=5_000)
    assert (done.fence, done.state, done.due_ms) == (Fence.OK, TaskState.QUEUED, None)
    h = await health(stores)
    assert (h.fails, h.circuit, h.err, h.lat) == (0, CircuitState.CLOSED, 0.0, None)
    (attempt,) = [json.loads(a) for a in (await stores.tasks.read("q", lease.task_id) or [])[4]]
    assert attempt["outcome"] == "expired"
    assert "before the endpoint answered" in attempt["error"]
    # Not the endpoint's fault: the retry may go back to it.
    (again,) = await claim(stores, at=now + 11_000)
    assert (again.endpoint_id, again.attempt) == ("ep0", 2)


async def test_a_lease_that_ran_out_after_a_202_counts_and_waits_its_backoff(
    stores: Stores,
) -> None:
    await queue(stores)
    now = stores.clock.now_ms()
    await stores.tasks.enqueue("q", [task(now)], now)
    (lease,) = await claim(stores)
    assert await stores.tasks.accept_many("q", [(lease.task_id, lease.token)], now + 40) == [
        Fence.OK
    ]
    assert (await health(stores)).lat == 40  # push to 202
    done = await end(stores, lease, EXPIRED, now + 10_000, delay=5_000)
    assert (done.state, done.due_ms) == (TaskState.SCHEDULED, now + 15_000)
    h = await health(stores)
    assert (h.fails, h.circuit, h.open_until) == (1, CircuitState.OPEN, now + 11_000)
    assert h.err > 0
    assert h.lat == round(40 * math.exp(-10 / 30), 1)  # faded; an expiry is no answer time


async def test_acceptance_is_fenced_by_the_lease(stores: Stores) -> None:
    await queue(stores)
    now = stores.clock.now_ms()
    await stores.tasks.enqueue("q", [task(now)], now)
    (lease,) = await claim(stores)
    assert await stores.tasks.accept_many(
        "q", [(lease.task_id, "stale"), (str(ULID()), "x")], now
    ) == [Fence.STALE, Fence.NOTASK]
    assert "acc" not in await record(stores, lease.task_id)
    await end(stores, lease, EXPIRED, now + 10_000)
    # Accepted late, after the attempt ended: changes nothing.
    assert await stores.tasks.accept_many("q", [(lease.task_id, lease.token)], now) == [Fence.STALE]


async def test_answers_push_failures_and_busy_feed_the_health(stores: Stores) -> None:
    await queue(stores, circuit_breaker={"failures": 3, "open_for": 1})
    now = stores.clock.now_ms()
    await stores.tasks.enqueue("q", [task(now) for _ in range(3)], now)
    a, b, c = await claim(stores, 3)
    await end(stores, a, OK, now + 20)
    assert (await health(stores)).lat == 20
    await end(stores, b, ERROR, now + 1_000)  # a push timeout: slow, and a failure
    h = await health(stores)
    assert (h.lat, h.fails, h.err) == (1_000, 1, 0.25)
    await end(stores, c, AttemptOutcome.BUSY, now + 1_010)
    h = await health(stores)
    assert h.fails == 1  # busy is no failure for the breaker, but the choice weighs it
    assert h.err > 0.25


async def test_the_tasks_own_failure_is_retried_but_never_opens_the_circuit(
    stores: Stores,
) -> None:
    await queue(stores, max_attempts=5)  # the breaker opens at the first failure
    now = stores.clock.now_ms()
    await stores.tasks.enqueue("q", [task(now) for _ in range(2)], now)
    raised, crashed = await claim(stores, 2)
    marked = Finish(
        raised.task_id, raised.token, ERROR, 500, "ValueError", delay_ms=700, task_failure=True
    )
    done = await stores.tasks.finish("q", marked, now + 30)
    assert (done.state, done.due_ms, done.circuit) == (TaskState.SCHEDULED, now + 730, "")
    h = await health(stores)
    assert (h.fails, h.circuit, h.err, h.lat) == (0, CircuitState.CLOSED, 0.0, 30)
    attempt = (await stores.tasks.read("q", raised.task_id) or [])[4][0]
    assert json.loads(attempt) | {"ended": 0, "started": 0} == {
        "n": 1,
        "ep": "ep0",
        "started": 0,
        "ended": 0,
        "outcome": "error",
        "status": 500,
        "error": "ValueError",
        "tf": True,
    }
    # The same answer unmarked is the endpoint's failure.
    done = await end(stores, crashed, ERROR, now + 40)
    assert done.circuit == "open"


async def test_an_unanswered_probe_frees_the_probe(stores: Stores) -> None:
    await queue(stores)
    now = stores.clock.now_ms()
    await stores.tasks.enqueue("q", [task(now) for _ in range(3)], now)
    (first,) = await claim(stores)
    await end(stores, first, ERROR, now)
    assert (await stores.tasks.claim("q", 5, "s", now)).status is ClaimStatus.NOENDPOINT
    (probe,) = await claim(stores, 5, at=now + 1_000)
    assert (await health(stores)).circuit is CircuitState.HALF_OPEN
    # The gateway pushing the probe dies: its expiry says nothing, another probe may go.
    await end(stores, probe, EXPIRED, now + 11_000)
    assert (await health(stores)).circuit is CircuitState.OPEN
    (again,) = await claim(stores, 5, at=now + 11_000)
    await end(stores, again, OK, now + 11_010)
    assert (await health(stores)).circuit is CircuitState.CLOSED


# --- choosing an endpoint -------------------------------------------------------------------------


@pytest.mark.parametrize("outcome", [ERROR, AttemptOutcome.RELEASED])
async def test_a_retry_goes_to_another_endpoint_when_one_can_take_it(
    stores: Stores, outcome: AttemptOutcome
) -> None:
    # A release leaves the health as it was: the last endpoint alone decides.
    await queue(stores, 100, 100, circuit_breaker={"failures": 100})
    now = stores.clock.now_ms()
    await stores.tasks.enqueue("q", [task(now)], now)
    tried = []
    for _ in range(4):
        (lease,) = await claim(stores)
        tried.append(lease.endpoint_id)
        await end(stores, lease, outcome, now)
    assert tried in (["ep0", "ep1"] * 2, ["ep1", "ep0"] * 2)


async def test_a_retry_goes_back_to_the_failed_endpoint_when_no_other_has_room(
    stores: Stores,
) -> None:
    await queue(stores, 100, circuit_breaker={"failures": 100})
    now = stores.clock.now_ms()
    await stores.tasks.enqueue("q", [task(now)], now)
    (lease,) = await claim(stores)
    await end(stores, lease, ERROR, now)
    # A second endpoint comes, and is soon full: the retry takes ep0 rather than wait.
    await add_endpoint(stores, 1, 1)
    await stores.tasks.enqueue("q", [filler := task(now, priority=1)], now)
    (held,) = await claim(stores)
    assert (held.task_id, held.endpoint_id) == (filler.id, "ep1")
    (retry,) = await claim(stores)
    assert (retry.task_id, retry.endpoint_id) == (lease.task_id, "ep0")


async def test_the_claim_weighs_failures_and_answer_time_not_only_pushes_in_flight(
    stores: Stores,
) -> None:
    await queue(stores, 100, 100, 100, circuit_breaker={"failures": 100})
    now = stores.clock.now_ms()
    await stores.tasks.enqueue("q", [task(now) for _ in range(3)], now)
    first = {x.endpoint_id: x for x in await claim(stores, 3)}
    assert set(first) == {"ep0", "ep1", "ep2"}  # nothing known: least in flight
    await end(stores, first["ep0"], ERROR, now + 5)  # fails fast: it must not look fast
    await end(stores, first["ep1"], OK, now + 30)  # slower
    await end(stores, first["ep2"], OK, now + 10)  # fast
    await stores.tasks.enqueue("q", [task(now) for _ in range(30)], now)
    spread = [x.endpoint_id for x in await claim(stores, 30, at=now + 100)]
    counts = {ep: spread.count(ep) for ep in ("ep0", "ep1", "ep2")}
    # Pushes in flight still count: the slower and the failing endpoint get some, not none.
    assert counts["ep2"] > counts["ep1"] > counts["ep0"] > 0, counts


async def test_health_fades_so_an_avoided_endpoint_is_tried_again(stores: Stores) -> None:
    await queue(stores, 100, 100, circuit_breaker={"failures": 100})
    now = stores.clock.now_ms()
    await stores.tasks.enqueue("q", [task(now) for _ in range(2)], now)
    a, b = await claim(stores, 2)
    await end(stores, a if a.endpoint_id == "ep0" else b, ERROR, now + 900)
    await end(stores, b if a.endpoint_id == "ep0" else a, OK, now + 10)
    await stores.tasks.enqueue("q", [task(now) for _ in range(2)], now)
    soon = await claim(stores, 2, at=now + 1_000)
    assert [x.endpoint_id for x in soon] == ["ep1", "ep1"]
    for x in soon:
        await end(stores, x, OK, now + 1_010)
    # Minutes without news of ep0: its past fades, and pushes in flight decide again.
    later = now + 10 * 60_000
    await stores.tasks.enqueue("q", [task(later) for _ in range(2)], later)
    again = await claim(stores, 2, at=later)
    assert sorted(x.endpoint_id for x in again) == ["ep0", "ep1"]
    listed = {x.record.id: x for x in await stores.queues.endpoints("q")}
    wire = listed["ep0"].record.to_wire(0, listed["ep0"].health, later)
    assert wire.error_rate < 0.001
    fresh = listed["ep0"].record.to_wire(0, listed["ep0"].health, now + 900)
    assert (fresh.error_rate, fresh.latency_ms, fresh.failures) == (0.25, 900, 1)


# --- the dispatcher never waits past the lease ------------------------------------------------


class WallClock:
    def now_ms(self) -> int:
        return int(time.time() * 1000)


class SilentPusher:
    """A push that is never answered (a hung endpoint), unless ``answer`` is set."""

    def __init__(self) -> None:
        self.cancelled = 0
        self.answer: asyncio.Future[Answer] | None = None

    async def push(self, lease: Lease, endpoint: EndpointRecord, timeout: float) -> Answer:
        try:
            if self.answer is not None:
                return await self.answer
            await asyncio.sleep(3600)
            raise AssertionError("unreachable")
        except asyncio.CancelledError:
            self.cancelled += 1
            raise


async def test_a_push_outliving_its_lease_is_the_endpoints_failure(stores: Stores) -> None:
    await queue(stores, push_timeout=30, lease_timeout=0.5)
    pusher = SilentPusher()
    clock = WallClock()
    dispatcher = Dispatcher(stores.tasks, Directory(stores.queues), pusher, clock)  # type: ignore[arg-type]
    new = task(clock.now_ms())
    await stores.tasks.enqueue("q", [new], clock.now_ms())
    await dispatcher.claim("q")
    ended = await until(lambda: _state(stores, new.id, "running", invert=True), timeout=5)
    assert ended["state"] in ("queued", "scheduled")
    assert ended["error"] == "no answer before the lease ran out"
    assert pusher.cancelled == 1
    h = await health(stores)
    assert h.fails == 1
    await dispatcher.stop()


async def test_heartbeats_keep_a_long_push_waiting(stores: Stores) -> None:
    await queue(stores, push_timeout=30, lease_timeout=0.5)
    pusher = SilentPusher()
    pusher.answer = asyncio.get_running_loop().create_future()
    clock = WallClock()
    dispatcher = Dispatcher(stores.tasks, Directory(stores.queues), pusher, clock)  # type: ignore[arg-type]
    new = task(clock.now_ms())
    await stores.tasks.enqueue("q", [new], clock.now_ms())
    (lease,) = (await dispatcher.claim("q")).leases
    for _ in range(6):  # 1.2 s: more than twice the lease
        await stores.tasks.heartbeat("q", new.id, lease.token, clock.now_ms())
        await asyncio.sleep(0.2)
    assert (await record(stores, new.id))["state"] == "running"
    pusher.answer.set_result(Answer(200, b"1", "application/json"))
    done = await until(lambda: _state(stores, new.id, "succeeded"), timeout=5)
    assert done["state"] == "succeeded"
    assert pusher.cancelled == 0
    await dispatcher.stop()


async def test_a_push_whose_lease_cannot_be_read_is_cut_and_left_to_expire(
    stores: Stores, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    await queue(stores, push_timeout=30, lease_timeout=0.5)
    pusher = SilentPusher()
    clock = WallClock()
    dispatcher = Dispatcher(stores.tasks, Directory(stores.queues), pusher, clock)  # type: ignore[arg-type]

    async def unreadable(*args: object) -> list[int | None]:
        raise ConnectionError("Redis went away")

    monkeypatch.setattr(stores.tasks, "lease_expiries", unreadable)
    new = task(clock.now_ms())
    await stores.tasks.enqueue("q", [new], clock.now_ms())
    await dispatcher.claim("q")
    await until(lambda: _true(pusher.cancelled == 1), timeout=5)
    await dispatcher.stop()
    # Nothing recorded: the lease runs out and the recoverer retries it, at no cost to the
    # endpoint.
    assert (await record(stores, new.id))["state"] == "running"
    assert (await health(stores)).fails == 0
    assert "Redis went away" in caplog.text


async def test_a_lease_read_that_ends_after_its_push_changes_nothing(
    stores: Stores, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The push is answered while the lease is being read, and the read then fails without
    heeding its cancellation (redis-py can absorb one mid-command): the push's answer stands,
    and the late read touches no finished timeout (it raised RuntimeError in a task nobody
    awaited)."""
    await queue(stores, push_timeout=30, lease_timeout=0.5)
    pusher = SilentPusher()
    pusher.answer = asyncio.get_running_loop().create_future()
    clock = WallClock()
    dispatcher = Dispatcher(stores.tasks, Directory(stores.queues), pusher, clock)  # type: ignore[arg-type]
    late_reads: list[BaseException | None] = []

    async def absorbing(*args: object) -> list[int | None]:
        assert pusher.answer is not None
        pusher.answer.set_result(Answer(200, b"1", "application/json"))
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(0.2)
        raise ConnectionError("read after the push ended")

    monkeypatch.setattr(stores.tasks, "lease_expiries", absorbing)
    loop = asyncio.get_running_loop()
    spawn = loop.create_task

    def watched(coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
        job = spawn(coro, **kwargs)
        job.add_done_callback(lambda t: late_reads.append(None if t.cancelled() else t.exception()))
        return job

    monkeypatch.setattr(loop, "create_task", watched)
    new = task(clock.now_ms())
    await stores.tasks.enqueue("q", [new], clock.now_ms())
    await dispatcher.claim("q")
    done = await until(lambda: _state(stores, new.id, "succeeded"), timeout=5)
    assert done["state"] == "succeeded"
    await until(lambda: _true(bool(late_reads)), timeout=5)
    await dispatcher.stop()
    assert [e for e in late_reads if e is not None] == []


async def _true(value: bool) -> bool | None:
    return value or None


async def _state(
    s: Stores, task_id: str, state: str, *, invert: bool = False
) -> dict[str, Any] | None:
    found = await record(s, task_id)
    return found if (found["state"] == state) != invert else None


def test_the_lease_budget_keeps_a_margin_before_the_lease_ends() -> None:
    assert lease_budget(10_000, 0) == 9.5
    assert lease_budget(1_000, 0) == 0.8  # a fifth of what is left, when that is less
    assert lease_budget(0, 100) == 0.0
