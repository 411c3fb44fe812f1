"""Completion callbacks against a real Redis and a real loopback receiver, one delivery step at
a time with a manual clock."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
from standardwebhooks import Webhook
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.dispatch.notices import NoticeDelivery
from gateway.dispatch.pusher import new_session
from gateway.services.notices import NoticeService
from gateway.store import keys
from gateway.store.dependencies import DependencyStore
from gateway.store.keys import QueueKeys
from gateway.store.notices import NoticeStore, new_notify_secret
from gateway.store.scripts import Scripts
from gateway.store.tasks import CancelResult, Finish
from sdk.wire import AttemptOutcome, QueuePolicy, SecretRotation, TaskNotice, TaskState
from tests.support import serve

from .conftest import Stores
from .test_store import new_task, seed, setup_queue


@dataclass
class Receiver:
    """A loopback HTTP server that records what it receives and answers from a script."""

    answers: list[int] = field(default_factory=list)  # statuses to give, in order; then 200
    got: list[tuple[dict[str, str], bytes]] = field(default_factory=list)
    url: str = ""

    async def endpoint(self, request: Request) -> Response:
        self.got.append((dict(request.headers), await request.body()))
        return Response(status_code=self.answers.pop(0) if self.answers else 200)


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    r = Receiver()
    async with serve(Starlette(routes=[Route("/done", r.endpoint, methods=["POST"])])) as base:
        r.url = f"{base}/done"
        yield r


@dataclass
class Notify:
    store: NoticeStore
    delivery: NoticeDelivery


@pytest.fixture
async def notify(stores: Stores) -> AsyncIterator[Notify]:
    store = NoticeStore(stores.redis, Scripts(stores.redis))
    session = new_session(allow_private=True)
    delivery = NoticeDelivery(
        store,
        session,
        stores.clock,
        timeout=5,
        max_tries=3,
        retry_delay=0.5,
        max_retry_delay=1,
        rng=random.Random(1),
    )
    yield Notify(store, delivery)
    await delivery.stop()
    await session.close()


async def step(n: Notify, now: int) -> int:
    started = await n.delivery.step(now)
    await n.delivery.drain()
    return started


async def finished_task(s: Stores, url: str, outcome: AttemptOutcome, text: str) -> str:
    now = s.clock.now_ms()
    task = new_task(now, notify=url, owner="acme")
    await s.tasks.enqueue("q", [task], now)
    (lease,) = (await s.tasks.claim("q", 1, seed(), now)).leases
    await s.tasks.finish("q", Finish(task.id, lease.token, outcome, text=text), now)
    return task.id


async def notice_of(s: Stores, task_id: str) -> dict[str, object]:
    record = await s.tasks.record("q", task_id)
    assert record is not None
    return dict(record["ntc"])


async def test_a_finished_task_notifies_its_url_signed_with_the_queues_secret(
    stores: Stores, notify: Notify, receiver: Receiver
) -> None:
    await setup_queue(stores)
    task_id = await finished_task(stores, receiver.url, AttemptOutcome.SUCCEEDED, '{"x": 1}')
    now = stores.clock.now_ms()
    assert await stores.redis.zscore(keys.NOTIFY_INDEX, "q") == now

    assert await step(notify, now) == 1
    ((headers, body),) = receiver.got
    secret = await notify.store.secret("q")
    assert secret is not None
    assert secret.startswith("whsec_")
    Webhook(secret).verify(body, headers)  # raises unless the signature is right
    with pytest.raises(Exception, match="signature"):
        Webhook("whsec_" + "A" * 43 + "=").verify(body, headers)
    notice = TaskNotice.model_validate_json(body)
    assert (notice.id, notice.queue, notice.name, notice.state) == (
        task_id,
        "q",
        "t",
        TaskState.SUCCEEDED,
    )
    assert (notice.result, notice.error, notice.attempt, notice.owner) == (
        {"x": 1},
        None,
        1,
        "acme",
    )
    assert int(notice.finished_at.timestamp() * 1000) == now
    assert headers["webhook-id"] == f"{task_id}_{now}"
    assert await notice_of(stores, task_id) == {"st": "delivered", "n": 1, "at": now}
    # Nothing is left to do: the queue has left the index, and further steps send nothing.
    assert await stores.redis.zcard(keys.NOTIFY_INDEX) == 0
    assert await stores.redis.zcard(QueueKeys.of("q").notify) == 0
    assert await step(notify, now + 60_000) == 0
    assert len(receiver.got) == 1


async def test_a_refused_delivery_is_retried_with_backoff_under_the_same_id(
    stores: Stores, notify: Notify, receiver: Receiver
) -> None:
    await setup_queue(stores)
    receiver.answers = [500, 503]
    task_id = await finished_task(stores, receiver.url, AttemptOutcome.FAILED, "bad input")
    now = stores.clock.now_ms()
    assert await step(notify, now) == 1
    ntc = await notice_of(stores, task_id)
    assert (ntc["st"], ntc["n"], ntc["le"]) == ("pending", 1, "answered 500")
    due = int(str(ntc["due"]))
    assert now <= due <= now + 500  # the first retry waits up to retry_delay
    assert await stores.redis.zscore(keys.NOTIFY_INDEX, "q") == due
    assert await step(notify, due - 1) == 0  # not before its time
    assert await step(notify, due) == 1
    ntc = await notice_of(stores, task_id)
    assert (ntc["st"], ntc["n"], ntc["le"]) == ("pending", 2, "answered 503")
    assert await step(notify, int(str(ntc["due"]))) == 1
    ntc = await notice_of(stores, task_id)
    assert (ntc["st"], ntc["n"]) == ("delivered", 3)
    assert len({h["webhook-id"] for h, _ in receiver.got}) == 1
    assert {TaskNotice.model_validate_json(b).error for _, b in receiver.got} == {"bad input"}


async def test_a_notice_nobody_accepts_is_given_up_after_max_tries_and_shown_on_the_task(
    stores: Stores, notify: Notify, receiver: Receiver
) -> None:
    await setup_queue(stores)
    receiver.answers = [500] * 10
    task_id = await finished_task(stores, receiver.url, AttemptOutcome.SUCCEEDED, "1")
    now = stores.clock.now_ms()
    for _ in range(3):
        assert await step(notify, now) == 1
        now += 1_000  # the longest retry delay
    assert await step(notify, now + 3_600_000) == 0
    ntc = await notice_of(stores, task_id)
    assert (ntc["st"], ntc["n"], ntc["le"]) == ("failed", 3, "answered 500")
    assert len(receiver.got) == 3
    assert await stores.redis.zcard(QueueKeys.of("q").notify) == 0


async def test_a_claimed_notice_whose_gateway_stopped_is_delivered_after_its_lease(
    stores: Stores, notify: Notify, receiver: Receiver
) -> None:
    await setup_queue(stores)
    task_id = await finished_task(stores, receiver.url, AttemptOutcome.SUCCEEDED, "1")
    now = stores.clock.now_ms()
    # A gateway claims it and stops before delivering.
    claim = await notify.store.claim("q", now, 10_000, 10)
    assert claim is not None
    (lost,) = claim.notices
    await notify.store.reindex("q", claim.next_due_ms)
    assert await step(notify, now + 9_999) == 0
    assert await step(notify, now + 10_000) == 1
    assert (await notice_of(stores, task_id))["st"] == "delivered"
    assert len(receiver.got) == 1
    # The stopped gateway's late word changes nothing.
    assert not await notify.store.settle(lost, "failed", now + 10_001, error="late")
    assert (await notice_of(stores, task_id))["st"] == "delivered"


async def test_cancelled_and_dependency_failed_tasks_notify_too(
    stores: Stores, notify: Notify, receiver: Receiver
) -> None:
    await setup_queue(stores)
    now = stores.clock.now_ms()
    parent = new_task(now)
    child = new_task(now, depends_on=(parent.id,), notify=receiver.url)
    waiting = new_task(now, run_at=now + 60_000, notify=receiver.url)
    await stores.tasks.enqueue("q", [parent, child, waiting], now)
    assert await stores.tasks.cancel("q", waiting.id, now) is CancelResult.CANCELLED
    assert await stores.tasks.cancel("q", parent.id, now) is CancelResult.CANCELLED
    assert await step(notify, now) == 2
    got = {n.id: n for n in (TaskNotice.model_validate_json(b) for _, b in receiver.got)}
    assert got[waiting.id].state is TaskState.CANCELLED
    assert got[child.id].state is TaskState.DEAD  # dead-lettered, as the default policy says
    assert parent.id in str(got[child.id].error)


async def test_a_dependency_in_another_queue_failing_notifies_the_dependent(
    stores: Stores, notify: Notify, receiver: Receiver
) -> None:
    await setup_queue(stores)
    now = stores.clock.now_ms()
    await stores.queues.put("other", QueuePolicy(), now)
    parent = new_task(now)
    await stores.tasks.enqueue("other", [parent], now)
    child = new_task(
        now, depends_on=(parent.id,), cross_deps=(("other", parent.id),), notify=receiver.url
    )
    await stores.tasks.enqueue("q", [child], now)
    deps = DependencyStore(stores.redis, Scripts(stores.redis))
    await deps.link("q", [(child.id, "other", parent.id)], now)
    await stores.tasks.cancel("other", parent.id, now)
    await deps.deliver("other", now)
    assert await step(notify, now) == 1
    (notice,) = [TaskNotice.model_validate_json(b) for _, b in receiver.got]
    assert (notice.id, notice.state) == (child.id, TaskState.DEAD)


async def test_the_index_is_rebuilt_when_a_gateway_stopped_before_marking_the_queue(
    stores: Stores, notify: Notify, receiver: Receiver
) -> None:
    await setup_queue(stores)
    await finished_task(stores, receiver.url, AttemptOutcome.SUCCEEDED, "1")
    await stores.redis.delete(keys.NOTIFY_INDEX)  # as if the gateway died right after the script
    assert await step(notify, stores.clock.now_ms()) == 1  # a new gateway's first step rescans
    assert len(receiver.got) == 1


async def test_a_notice_recorded_while_the_index_is_rewritten_is_not_lost(
    stores: Stores, notify: Notify, receiver: Receiver
) -> None:
    await setup_queue(stores)
    now = stores.clock.now_ms()
    await notify.delivery.step(now)  # the first step's rescan is done
    claim = await notify.store.claim("q", now, 10_000, 10)  # nothing due: the set is empty
    assert claim is not None
    assert claim.next_due_ms is None
    await finished_task(stores, receiver.url, AttemptOutcome.SUCCEEDED, "1")  # marks the queue
    await notify.store.reindex("q", None)  # the claim's stale view would drop the queue...
    assert await stores.redis.zscore(keys.NOTIFY_INDEX, "q") == now  # ...but looks again
    assert await step(notify, now) == 1


async def test_a_resubmitted_task_drops_its_pending_notice_and_tells_of_its_next_end(
    stores: Stores, notify: Notify, receiver: Receiver
) -> None:
    from gateway.store.operations import OperationsStore

    await setup_queue(stores, QueuePolicy(dead_letter=True, max_attempts=1))
    task_id = await finished_task(stores, receiver.url, AttemptOutcome.FAILED, "boom")
    ops = OperationsStore(stores.redis, Scripts(stores.redis), stores.tasks)
    now = stores.clock.now_ms()
    assert (await stores.tasks.record("q", task_id) or {})["state"] == "dead"
    await ops.resubmit("q", [task_id], now, reset_attempts=True)
    assert await step(notify, now) == 0
    assert "ntc" not in (await stores.tasks.record("q", task_id) or {})
    assert receiver.got == []


async def test_after_a_rotation_notices_carry_both_signatures_until_the_overlap_ends(
    stores: Stores, notify: Notify, receiver: Receiver
) -> None:
    await setup_queue(stores)
    old = await notify.store.secret("q")
    assert old is not None
    now = stores.clock.now_ms()
    new = new_notify_secret()
    assert await notify.store.rotate_secret("q", new, now + 60_000)
    assert await notify.store.rotate_secret("nope", new, now) is False

    await finished_task(stores, receiver.url, AttemptOutcome.SUCCEEDED, "1")
    assert await step(notify, now) == 1
    ((headers, body),) = receiver.got
    assert len(headers["webhook-signature"].split(" ")) == 2
    for secret in (new, old):  # a receiver holding either accepts it
        Webhook(secret).verify(body, headers)

    later = now + 60_000  # the overlap is over: the new secret alone
    stores.clock.advance(60_000)
    await finished_task(stores, receiver.url, AttemptOutcome.SUCCEEDED, "2")
    assert await step(notify, later) == 1
    headers, body = receiver.got[1]
    assert len(headers["webhook-signature"].split(" ")) == 1
    Webhook(new).verify(body, headers)
    with pytest.raises(Exception, match="signature"):
        Webhook(old).verify(body, headers)


async def test_no_overlap_drops_the_previous_notify_secret_at_once_for_every_clock(
    stores: Stores, notify: Notify, receiver: Receiver
) -> None:
    await setup_queue(stores)
    notices = NoticeService(NoticeStore(stores.redis, Scripts(stores.redis)), stores.clock)
    old = (await notices.secret("q")).secret
    await finished_task(stores, receiver.url, AttemptOutcome.SUCCEEDED, "1")  # a notice due
    stores.clock.advance(10)
    rotated = await notices.rotate("q", SecretRotation(overlap=0))
    assert (rotated.secret != old, rotated.previous_secret_until) == (True, None)
    # Delivered by another gateway whose clock is a little behind the one that rotated.
    assert await step(notify, stores.clock.now_ms() - 5) == 1
    ((headers, body),) = receiver.got
    assert len(headers["webhook-signature"].split(" ")) == 1
    Webhook(rotated.secret).verify(body, headers)


async def test_a_notice_on_a_pooled_connection_closed_under_it_goes_again_at_once(
    stores: Stores, notify: Notify
) -> None:
    # A raw HTTP/1.1 receiver (when it closes is exact): it answers the first notice of each
    # connection and closes the connection when a second one comes on it, unread, as a
    # receiver's idle timeout crossing the notice on the wire would.
    heard: list[str] = []
    connections = 0

    async def serve_raw(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode().split("\r\n")[1:-2]
            headers = {k.lower(): v for k, v in (x.split(": ", 1) for x in lines)}
            await reader.readexactly(int(headers["content-length"]))
            heard.append(headers["webhook-id"])
            writer.write(b"HTTP/1.1 204 No Content\r\n\r\n")
            await writer.drain()
            await reader.readuntil(b"\r\n\r\n")  # the next request on this connection: dropped
        except asyncio.IncompleteReadError:
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve_raw, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/done"
    async with server:
        await setup_queue(stores)
        first = await finished_task(stores, url, AttemptOutcome.SUCCEEDED, "1")
        assert await step(notify, stores.clock.now_ms()) == 1
        second = await finished_task(stores, url, AttemptOutcome.SUCCEEDED, "2")
        assert await step(notify, stores.clock.now_ms()) == 1
    assert [h.split("_")[0] for h in heard] == [first, second]
    assert connections == 2
    assert (await notice_of(stores, second))["st"] == "delivered"
    assert (await notice_of(stores, second))["n"] == 1  # no try spent on the race
