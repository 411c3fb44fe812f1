"""An enqueue's own claim: when this gateway's dispatcher is idle, the claim script rides in the
enqueue's round trip and the gateway pushes what it leased at once, without a dispatcher cycle
(gateway/dispatch/dispatcher.py, ``Dispatcher.offer``). A finish carries one the same way while
ready tasks wait, and says whether they do, so a lone task's end costs no claim."""

from __future__ import annotations

import secrets
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from aiohttp.http_writer import StreamWriter
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Route

from gateway.core.errors import QueueNotFound
from gateway.dispatch import dispatcher as dispatcher_module
from gateway.dispatch.dispatcher import Dispatcher
from gateway.store.clock import ManualClock
from gateway.store.keys import QueueKeys
from gateway.store.pubsub import Notifier
from gateway.store.records import load_record
from gateway.store.scripts import Scripts
from gateway.store.tasks import (
    Claim,
    ClaimOrder,
    ClaimStatus,
    Ended,
    Fence,
    Finish,
    TaskStore,
)
from sdk.wire import AttemptOutcome, QueuePolicy, TaskState
from tests.scripted_worker import ADMIN, Worker
from tests.support import free_port, live_gateway, serve, until

from .conftest import Stores
from .test_store import new_task, setup_queue


class Taker:
    """What a ClaimOrder's taker was handed."""

    def __init__(self, now_ms: int = 1_700_000_000_000) -> None:
        self.taken: list[Claim | None] = []
        self.now_ms = now_ms

    def order(self, count: int = 8) -> ClaimOrder:
        return ClaimOrder(count, secrets.token_hex(16), lambda: self.now_ms, self.taken.append)


async def test_the_claim_rides_with_the_enqueue_and_leases_the_new_task(stores: Stores) -> None:
    await setup_queue(stores)
    now = stores.clock.now_ms()
    # The claim's time is read when the round trip is sent, after the enqueue's own (an earlier
    # time stored by a claim would let a rate bucket refill early).
    taker = Taker(now + 40)
    task = new_task(now)
    enqueued = await stores.tasks.enqueue_batch("q", [task], now, claim=taker.order())
    # The answer says what the enqueue stored; the claim ran after it.
    assert enqueued.stored[0].state is TaskState.QUEUED
    (claim,) = taker.taken
    assert claim is not None
    assert (claim.status, claim.settled) == (ClaimStatus.OK, True)
    (lease,) = claim.leases
    assert (lease.task_id, lease.endpoint_id, lease.attempt) == (task.id, "ep1", 1)
    assert lease.started_ms == now + 40
    record = load_record(await stores.redis.hget(QueueKeys.of("q").meta, task.id))
    assert (record["state"], record["lease"]) == ("running", lease.token)


async def test_the_claim_keeps_the_claim_scripts_rules(stores: Stores) -> None:
    """Priorities, concurrency and pause hold as in any claim: it is the same script."""
    await setup_queue(stores, concurrency=1)
    now = stores.clock.now_ms()
    waiting = new_task(now)
    await stores.tasks.enqueue("q", [waiting], now)
    taker = Taker()
    urgent = new_task(now, priority=5)
    await stores.tasks.enqueue_batch("q", [urgent, new_task(now)], now, claim=taker.order())
    (claim,) = taker.taken
    assert claim is not None
    # One slot on the endpoint: the highest priority goes, and the claim is settled (full).
    assert [lease.task_id for lease in claim.leases] == [urgent.id]
    assert claim.settled
    await stores.queues.put("q", QueuePolicy(paused=True), now)
    paused = Taker()
    await stores.tasks.enqueue_batch("q", [new_task(now)], now, claim=paused.order())
    assert [c.status for c in paused.taken if c] == [ClaimStatus.PAUSED]


async def test_the_taker_hears_of_a_refused_enqueue_and_of_a_lost_round_trip(
    stores: Stores, redis_url: str
) -> None:
    taker = Taker()
    now = stores.clock.now_ms()
    with pytest.raises(QueueNotFound):
        await stores.tasks.enqueue_batch("nope", [new_task(now)], now, claim=taker.order())
    assert [c.status for c in taker.taken if c] == [ClaimStatus.NOQUEUE]
    # No answer at all (Redis unreachable, no retries: they take seconds): the taker is told
    # so, once.
    dead = Redis(port=free_port(), decode_responses=True, retry=Retry(NoBackoff(), 0))
    lost = Taker()
    with pytest.raises(RedisConnectionError):
        await TaskStore(dead, Scripts(dead)).enqueue_batch(
            "q", [new_task(now)], now, claim=lost.order()
        )
    assert lost.taken == [None]
    await dead.aclose()


async def test_scripts_flushed_before_the_enqueue_the_claim_rides_again(stores: Stores) -> None:
    await setup_queue(stores)
    await stores.redis.script_flush()
    now = stores.clock.now_ms()
    taker = Taker()
    task = new_task(now)
    await stores.tasks.enqueue_batch("q", [task], now, claim=taker.order())
    (claim,) = taker.taken
    assert claim is not None
    assert [lease.task_id for lease in claim.leases] == [task.id]


async def test_a_finish_says_whether_ready_tasks_wait_and_carries_a_claim(
    stores: Stores,
) -> None:
    await setup_queue(stores, concurrency=1)
    now = stores.clock.now_ms()
    first, second = new_task(now), new_task(now)
    await stores.tasks.enqueue("q", [first, second], now)
    (lease,) = (await stores.tasks.claim("q", 8, secrets.token_hex(16), now)).leases
    await stores.redis.script_flush()  # the finish and its claim are sent again, loaded
    taker = Taker(now + 30)
    done = Finish(lease.task_id, lease.token, AttemptOutcome.SUCCEEDED, 200, "null")
    ended = await stores.tasks.finish_batch("q", [done], now + 20, claim=taker.order())
    assert ended.ready  # the second task waited for the room this end freed
    assert [(end.fence, end.state) for end in ended.done] == [(Fence.OK, TaskState.SUCCEEDED)]
    (claim,) = taker.taken
    assert claim is not None
    (next_lease,) = claim.leases  # the claim ran after the finish: the slot was free
    assert (next_lease.task_id, next_lease.started_ms) == (second.id, now + 30)
    last = Finish(second.id, next_lease.token, AttemptOutcome.SUCCEEDED, 200, "null")
    assert not (await stores.tasks.finish_batch("q", [last], now + 40)).ready
    # No answer at all (Redis unreachable, no retries: they take seconds): the taker is told
    # so, once.
    dead = Redis(port=free_port(), decode_responses=True, retry=Retry(NoBackoff(), 0))
    lost = Taker()
    with pytest.raises(RedisConnectionError):
        await TaskStore(dead, Scripts(dead)).finish_batch("q", [last], now, claim=lost.order())
    assert lost.taken == [None]
    await dead.aclose()


async def test_a_gateway_tells_its_dispatchers_finish_wake_message_apart(stores: Stores) -> None:
    """The dispatcher acts on the finish's answer itself: the wake message of its finish goes
    to the pull polls of its own gateway and to every other gateway; a finish from elsewhere (a
    callback, the recoverer) wakes this gateway's dispatcher too."""
    await setup_queue(stores, concurrency=1)
    heard: list[tuple[str, str]] = []
    notifier = Notifier(
        stores.redis,
        on_wake=lambda queue, ready: heard.append(("wake", queue)),
        origin="gw-a",
        on_own_wake=lambda queue, ready: heard.append(("own", queue)),
    )
    await notifier.start()
    try:
        ours = TaskStore(stores.redis, Scripts(stores.redis), origin="gw-a")
        now = stores.clock.now_ms()
        await stores.tasks.enqueue("q", [new_task(now) for _ in range(3)], now)
        ended = []
        for finish in (ours.finish_batch, ours.finish_many):
            (lease,) = (await stores.tasks.claim("q", 8, secrets.token_hex(16), now)).leases
            done = Finish(lease.task_id, lease.token, AttemptOutcome.SUCCEEDED, 200, "null")
            ended.append(await finish("q", [done], now))
        await until(lambda: len(heard) == 3, what="three wake-ups")
        # One gateway listens: the dispatcher's finish may carry the next claim itself.
        assert (ended[0].ready, ended[0].alone, ended[0].shared) == (True, True, False)
    finally:
        await notifier.stop()
    # The enqueue's (from no gateway here), the dispatcher's finish, another finish.
    assert heard == [("wake", "q"), ("own", "q"), ("wake", "q")]


async def test_a_finish_heard_by_another_gateway_is_not_alone(stores: Stores) -> None:
    """Another gateway listens: the room is left to its loop, so no finish here claims it."""
    await setup_queue(stores, concurrency=1)
    notifiers = [Notifier(stores.redis, on_wake=lambda q, r: None, origin=o) for o in "ab"]
    for notifier in notifiers:
        await notifier.start()
    try:
        ours = TaskStore(stores.redis, Scripts(stores.redis), origin="a")
        now = stores.clock.now_ms()
        await stores.tasks.enqueue("q", [new_task(now), new_task(now)], now)
        (lease,) = (await stores.tasks.claim("q", 8, secrets.token_hex(16), now)).leases
        done = Finish(lease.task_id, lease.token, AttemptOutcome.SUCCEEDED, 200, "null")
        ended = await ours.finish_batch("q", [done], now)
    finally:
        for notifier in notifiers:
            await notifier.stop()
    assert (ended.ready, ended.alone, ended.shared) == (True, False, True)


# --- the dispatcher -------------------------------------------------------------------------


@pytest.fixture
def dispatchers(monkeypatch: pytest.MonkeyPatch) -> list[Dispatcher]:
    """Every Dispatcher the gateways of the test make, in order."""
    made: list[Dispatcher] = []
    original = Dispatcher.__init__

    def init(self: Dispatcher, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(Dispatcher, "__init__", init)
    return made


@pytest.fixture
async def worker() -> AsyncIterator[tuple[Worker, str]]:
    made = Worker()
    async with serve(Starlette(routes=[Route("/", made.handle, methods=["POST"])])) as url:
        yield made, url


async def _queue_with_endpoint(
    api: Any, worker: Worker, url: str, *, concurrency: int = 10
) -> None:
    (await api.put("/v1/queues/q", json={})).raise_for_status()
    endpoint = {"url": url + "/", "concurrency": concurrency}
    r = await api.post("/v1/queues/q/endpoints", json=endpoint)
    assert r.status_code == 201, r.text
    worker.secret = r.json()["secret"]


def _loop_claims(dispatcher: Dispatcher, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The queues of the claims the dispatcher's loops make from now on (not those that ride
    with an enqueue or a finish)."""
    claims: list[str] = []
    claim = dispatcher.claim

    async def counted(queue: str) -> Claim:
        claims.append(queue)
        return await claim(queue)

    monkeypatch.setattr(dispatcher, "claim", counted)
    return claims


async def test_a_lone_enqueue_is_pushed_without_a_dispatcher_cycle(
    redis_url: str,
    dispatchers: list[Dispatcher],
    worker: tuple[Worker, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With every wake-up of the dispatcher's loop dropped (the enqueue's own, and the pub/sub
    message of its script), the task is still pushed: by the claim that rode with the enqueue.
    Without it, nothing would claim the task. (Changes are dropped too: the pub/sub echo of the
    queue's and endpoint's registration may come after the loop went idle, on a loaded machine,
    and would start a claim of its own.)"""
    scripted, url = worker
    async with live_gateway(redis_url, ADMIN) as (_, api):
        (dispatcher,) = dispatchers
        await _queue_with_endpoint(api, scripted, url)
        await until(lambda: "q" in dispatcher._idle, what="the queue's loop to be idle")
        signals: list[tuple[str, bool]] = []

        def signal(queue: str, *, change: bool) -> None:
            signals.append((queue, change))

        monkeypatch.setattr(dispatcher, "_signal", signal)
        claims = _loop_claims(dispatcher, monkeypatch)
        r = await api.post("/v1/queues/q/tasks", json={"name": "hello", "payload": 1})
        assert r.status_code == 201, r.text
        task_id = r.json()["id"]
        await until(lambda: scripted.pushes(task_id), what="the push")
        finished = await api.get(f"/v1/tasks/{task_id}", params={"wait": 10})
        assert finished.json()["state"] == "succeeded"
        await until(lambda: not dispatcher._finishes._writers, what="the finish's answer")
        assert claims == []  # the loop never claimed
        # Nor was it woken by the end: the finish said no other task waits.
        assert [queue for queue, change in signals if not change] == []


async def test_a_lone_enqueues_answer_is_written_before_its_push(
    redis_url: str,
    dispatchers: list[Dispatcher],
    worker: tuple[Worker, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The enqueue's answer never waits for the push of what its claim took: the answer is
    written to the producer's connection first, in the same turn of the loop as the claim's
    answer was read, and the push right after it (it used to be written first: the handler
    yielded to the push's task twice before building its answer)."""
    scripted, url = worker
    order: list[str] = []
    write, writelines = StreamWriter._write, StreamWriter._writelines

    def written(self: StreamWriter, chunk: Any) -> None:
        order.append("push written")
        write(self, chunk)

    def lines_written(self: StreamWriter, chunks: Any) -> None:
        order.append("push written")
        writelines(self, chunks)

    answer = Response.__call__

    async def answered(self: Response, scope: Any, receive: Any, send: Any) -> None:
        await answer(self, scope, receive, send)
        if scope["path"] == "/v1/queues/q/tasks":  # the enqueue's (not the worker's)
            order.append("answer written")

    monkeypatch.setattr(StreamWriter, "_write", written)
    monkeypatch.setattr(StreamWriter, "_writelines", lines_written)
    monkeypatch.setattr(Response, "__call__", answered)
    async with live_gateway(redis_url, ADMIN) as (_, api):
        (dispatcher,) = dispatchers
        await _queue_with_endpoint(api, scripted, url)
        for payload in (1, 2):  # the first opens the connection the second is pushed on
            await until(lambda: "q" in dispatcher._idle, what="the queue's loop to be idle")
            order.clear()
            r = await api.post("/v1/queues/q/tasks", json={"name": "hello", "payload": payload})
            assert r.status_code == 201, r.text
            task_id = r.json()["id"]
            finished = await api.get(f"/v1/tasks/{task_id}", params={"wait": 10})
            assert finished.json()["state"] == "succeeded"
            await until(lambda: not dispatcher._finishes._writers, what="the finish's answer")
            assert scripted.pushes(task_id)  # pushed by the claim that rode with the enqueue
        assert order[:2] == ["answer written", "push written"]


async def test_a_claim_that_leaves_tasks_ready_wakes_the_loop(
    redis_url: str, dispatchers: list[Dispatcher], worker: tuple[Worker, str]
) -> None:
    """A batch larger than one claim: the enqueue's claim takes ``dispatch_batch`` tasks, and
    the loop, woken by it, claims the rest."""
    scripted, url = worker
    async with live_gateway(redis_url, ADMIN, dispatch_batch=2) as (_, api):
        (dispatcher,) = dispatchers
        await _queue_with_endpoint(api, scripted, url)
        await until(lambda: "q" in dispatcher._idle, what="the queue's loop to be idle")
        tasks = [{"name": "hello", "payload": i} for i in range(5)]
        r = await api.post("/v1/queues/q/tasks/batch", json={"tasks": tasks})
        assert r.status_code == 201, r.text
        ids = [t["id"] for t in r.json()["tasks"]]
        for task_id in ids:
            finished = await api.get(f"/v1/tasks/{task_id}", params={"wait": 10})
            assert finished.json()["state"] == "succeeded"


def test_the_loop_is_woken_only_when_the_claim_left_it_something_to_do(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    dispatcher = Dispatcher(None, None, None, None)  # type: ignore[arg-type]
    woken: list[str] = []
    monkeypatch.setattr(dispatcher, "wake", woken.append)

    def take(claim: Claim | None) -> tuple[bool, bool]:
        """(woken, still idle) after the claim is taken from an idle loop."""
        woken.clear()
        dispatcher._idle.add("q")
        dispatcher.take("q", claim)
        return woken == ["q"], "q" in dispatcher._idle

    # All that could go went, or nothing was there: the loop idles on.
    assert take(Claim(ClaimStatus.OK, [], settled=True)) == (False, True)
    assert take(Claim(ClaimStatus.EMPTY, [])) == (False, True)
    # Held until an attempt ends or a change: not woken, but no longer idle (the next enqueue
    # wakes it rather than claim only to hear the same).
    assert take(Claim(ClaimStatus.FULL, [])) == (False, False)
    assert take(Claim(ClaimStatus.PAUSED, [])) == (False, False)
    assert take(Claim(ClaimStatus.NOENDPOINT, [])) == (False, False)
    # Left work, or a time the loop must keep (a circuit's probe, a rate bucket), or no answer.
    assert take(Claim(ClaimStatus.OK, [], settled=False))[0]
    assert take(Claim(ClaimStatus.NOENDPOINT, [], 5))[0]
    assert take(Claim(ClaimStatus.RATE, [], 5, held=True))[0]
    assert take(Claim(ClaimStatus.NOQUEUE, []))[0]
    assert take(None)[0]


async def test_a_task_enqueued_where_the_dispatcher_is_stopped_goes_through_another(
    redis_url: str, dispatchers: list[Dispatcher], worker: tuple[Worker, str]
) -> None:
    """Gateway A cannot claim (its dispatcher stopped): no claim rides with its enqueue, and
    gateway B's dispatcher, woken over pub/sub, pushes the task."""
    scripted, url = worker
    async with (
        live_gateway(redis_url, ADMIN) as (_, api_a),
        live_gateway(redis_url, ADMIN) as (_, api_b),
    ):
        a, b = dispatchers
        await _queue_with_endpoint(api_b, scripted, url)
        await until(lambda: "q" in a._idle and "q" in b._idle, what="both loops to be idle")
        await a.stop()
        assert a.offer("q") is None
        r = await api_a.post("/v1/queues/q/tasks", json={"name": "hello", "payload": 1})
        assert r.status_code == 201, r.text
        finished = await api_a.get(f"/v1/tasks/{r.json()['id']}", params={"wait": 10})
        assert finished.json()["state"] == "succeeded"


async def test_a_gateway_tells_its_own_enqueues_wake_message_apart(stores: Stores) -> None:
    """Its dispatcher was woken, or claimed, by the enqueue itself: the message of its own
    enqueue goes to the pull polls only; another gateway's goes to both."""
    await setup_queue(stores)
    heard: list[tuple[str, str, int | None]] = []
    notifier = Notifier(
        stores.redis,
        on_wake=lambda queue, ready: heard.append(("wake", queue, ready)),
        origin="gw-a",
        on_own_wake=lambda queue, ready: heard.append(("own", queue, ready)),
    )
    await notifier.start()
    try:
        scripts = Scripts(stores.redis)
        now = stores.clock.now_ms()
        ours = TaskStore(stores.redis, scripts, origin="gw-a")
        theirs = TaskStore(stores.redis, scripts, origin="gw-b")
        untold = TaskStore(stores.redis, scripts)
        for store, count in ((ours, 2), (theirs, 1), (untold, 3)):
            await store.enqueue("q", [new_task(now) for _ in range(count)], now)
            await stores.tasks.claim("q", 10, secrets.token_hex(16), now)  # empty again
        await until(lambda: len(heard) == 3, what="three wake-ups")
    finally:
        await notifier.stop()
    assert heard == [("own", "q", 2), ("wake", "q", 1), ("wake", "q", 3)]


def test_one_enqueue_at_a_time_carries_a_claim_for_a_queue() -> None:
    """A burst of enqueues wakes the loop, which claims for all of them at once, rather than
    each carrying a claim of its own."""
    dispatcher = Dispatcher(None, None, None, ManualClock())  # type: ignore[arg-type]
    dispatcher._idle.update({"q", "r"})
    first = dispatcher.offer("q")
    assert first is not None
    assert dispatcher.offer("q") is None
    assert dispatcher.offer("r") is not None  # another queue's
    first.take(Claim(ClaimStatus.OK, [], settled=True))
    assert dispatcher.offer("q") is not None


async def test_a_backlog_drains_with_each_finish_claiming_the_room_it_frees(
    redis_url: str,
    dispatchers: list[Dispatcher],
    worker: tuple[Worker, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two slots and twelve tasks: once a finish has said that tasks wait, each next finish
    carries the claim of the slots it frees, and the loop claims no more."""
    scripted, url = worker
    async with live_gateway(redis_url, ADMIN) as (_, api):
        (dispatcher,) = dispatchers
        await _queue_with_endpoint(api, scripted, url, concurrency=2)
        await until(lambda: "q" in dispatcher._idle, what="the queue's loop to be idle")
        loop_claims = _loop_claims(dispatcher, monkeypatch)
        carried: list[bool] = []
        finish_batch = dispatcher._tasks.finish_batch

        async def recorded(*args: Any, claim: ClaimOrder | None = None) -> Ended:
            carried.append(claim is not None)
            return await finish_batch(*args, claim=claim)

        monkeypatch.setattr(dispatcher._tasks, "finish_batch", recorded)
        tasks = [{"name": "hello", "payload": i} for i in range(12)]
        r = await api.post("/v1/queues/q/tasks/batch", json={"tasks": tasks})
        assert r.status_code == 201, r.text
        for task in r.json()["tasks"]:
            finished = await api.get(f"/v1/tasks/{task['id']}", params={"wait": 10})
            assert finished.json()["state"] == "succeeded"
        await until(lambda: not dispatcher._finishes._writers, what="the last finish's answer")
    # The enqueue's claim took the first two; the first finish woke the loop (nothing had said
    # yet that tasks wait); from then on the finishes claimed.
    assert len(loop_claims) <= 2, loop_claims
    assert carried.count(True) >= 3, carried


async def test_a_callbacks_end_wakes_the_loop_only_through_the_finish_script(
    redis_url: str,
    dispatchers: list[Dispatcher],
    worker: tuple[Worker, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A result callback ends an attempt as a push's answer does: when tasks wait for the room
    it frees, the finish script's jg:wake (which names no gateway) wakes this gateway's loop
    too; when none waits, nothing does, since a claim would find nothing."""
    scripted, url = worker
    scripted.script["accepted"] = (202, None)
    async with live_gateway(redis_url, ADMIN) as (_, api), httpx.AsyncClient() as callbacks:

        async def run_accepted() -> tuple[str, str, str]:
            r = await api.post("/v1/queues/q/tasks", json={"name": "accepted"})
            assert r.status_code == 201, r.text
            task_id = r.json()["id"]
            ((headers, _),) = await until(lambda: scripted.pushes(task_id), what="the push")
            return task_id, headers["jobgate-callback"], headers["jobgate-lease"]

        async def call_back(base: str, lease: str) -> None:
            r = await callbacks.post(
                f"{base}/result", json={"result": 1}, headers={"jobgate-lease": lease}
            )
            assert r.status_code == 200, r.text

        (dispatcher,) = dispatchers
        await _queue_with_endpoint(api, scripted, url, concurrency=1)
        await until(lambda: "q" in dispatcher._idle, what="the queue's loop to be idle")
        claims = _loop_claims(dispatcher, monkeypatch)
        _, base, lease = await run_accepted()
        r = await api.post("/v1/queues/q/tasks", json={"name": "hello"})
        waiting = r.json()["id"]  # the endpoint is full: it waits for the first's end
        await call_back(base, lease)
        finished = await api.get(f"/v1/tasks/{waiting}", params={"wait": 10})
        assert finished.json()["state"] == "succeeded"
        assert claims  # the loop claimed it, woken by the jg:wake message
        claimed = len(claims)
        await until(lambda: "q" in dispatcher._idle, what="the queue's loop to be idle")
        _, base, lease = await run_accepted()  # pushed by the claim its enqueue carried
        await call_back(base, lease)
        await until(lambda: not dispatcher._pushes, what="the pushes to end")
        assert len(claims) == claimed  # the lone end woke no loop: nothing waited


async def test_room_left_to_a_gateway_that_claims_nothing_is_claimed_here_after_a_moment(
    redis_url: str,
    dispatchers: list[Dispatcher],
    worker: tuple[Worker, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Another gateway hears every finish's wake message but claims nothing (it is stopping,
    say). Each finish leaves the room it frees to that gateway and does not wake its own loop;
    when no wake-up came within ``LEFT_TO_OTHERS``, the loop claims the room itself: the queue
    drains, a moment slower."""
    monkeypatch.setattr(dispatcher_module, "LEFT_TO_OTHERS", 0.05)
    scripted, url = worker
    other = Redis.from_url(redis_url, decode_responses=True)
    silent = Notifier(other, on_wake=lambda queue, ready: None, origin="stopping")
    async with live_gateway(redis_url, ADMIN) as (_, api):
        (dispatcher,) = dispatchers
        await _queue_with_endpoint(api, scripted, url, concurrency=2)
        await until(lambda: "q" in dispatcher._idle, what="the queue's loop to be idle")
        await silent.start()
        left: list[str] = []
        leave = dispatcher._leave

        def counted(queue: str) -> None:
            left.append(queue)
            leave(queue)

        monkeypatch.setattr(dispatcher, "_leave", counted)
        claims = _loop_claims(dispatcher, monkeypatch)
        tasks = [{"name": "hello", "payload": i} for i in range(8)]
        started = time.monotonic()
        r = await api.post("/v1/queues/q/tasks/batch", json={"tasks": tasks})
        assert r.status_code == 201, r.text
        for task in r.json()["tasks"]:
            finished = await api.get(f"/v1/tasks/{task['id']}", params={"wait": 10})
            assert finished.json()["state"] == "succeeded"
        # Not on the loop's 5 s safety tick: three rounds of room would take 15 s.
        assert time.monotonic() - started < 4
        await silent.stop()
    await other.aclose()
    assert left  # the finishes left the room they freed to the other gateway
    assert claims  # which claimed nothing: this gateway's loop did, after a moment
