"""Waits for an event and cancel_on against a real Redis, one piece at a time with a manual
clock (in ms) (docs/durable.md, "Waiting for an event"): the wait path (:class:`Waits`), the event's
consumer (:class:`WaitResumer`, called as the events service will call it), the timeout in the
recoverer's promotion, and the index left empty once every wait is over."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import timedelta

import pytest
from ulid import ULID

from gateway.core.matching import canonical, shape_of
from gateway.services.enqueue.new_records import new_task
from gateway.services.event_types import AcceptedEvent, Touched
from gateway.services.task_reads import TaskReader
from gateway.services.waits import WaitResumer, Waits
from gateway.store.events import RECENT_LIMIT
from gateway.store.keys import QueueKeys, event_waits
from gateway.store.records import to_datetime
from gateway.store.tasks import Finish, Wait
from sdk.wire import (
    AttemptOutcome,
    CancelOn,
    QueuePolicy,
    StepWait,
    TaskCreate,
    TaskState,
    TaskStep,
    WaitIn,
)

from .conftest import Stores
from .test_recoverer import Q, claim, enqueue, make_queue, record


@dataclass
class Recent:
    """The events service's recent events, in memory (RecentEvents), read in pages of
    ``RECENT_LIMIT`` as the store reads them (tests/integration/test_events.py checks it)."""

    events: list[AcceptedEvent] = field(default_factory=list)

    def add(self, event: AcceptedEvent) -> AcceptedEvent:
        self.events.append(event)
        return event

    async def since(self, name: str, after_ms: int, offset: int = 0) -> list[AcceptedEvent]:
        found = [e for e in self.events if e.name == name and e.accepted_ms >= after_ms]
        return sorted(found, key=lambda e: e.accepted_ms)[offset : offset + RECENT_LIMIT]


@dataclass
class Rig:
    s: Stores
    recent: Recent
    waits: Waits
    resumer: WaitResumer

    def event(self, name: str, data: dict[str, object], at: int | None = None) -> AcceptedEvent:
        at = self.s.clock.now_ms() if at is None else at
        return AcceptedEvent(str(ULID()), name, data, at)  # type: ignore[arg-type]

    async def publish(
        self, name: str, data: dict[str, object]
    ) -> tuple[AcceptedEvent, list[Touched]]:
        """An event as the events service handles it: written, then handed to the consumer."""
        event = self.recent.add(self.event(name, data))
        return event, await self.resumer.consume(event)

    async def waiting(
        self,
        n: int = 1,
        *,
        step: str = "approval",
        match: dict[str, object] | None = None,
        timeout: float = 60,
        lookback: float = 0,
    ) -> list[str]:
        """``n`` tasks enqueued, claimed and each waiting for 'approved' with ``match`` (whose
        string values may hold '{i}': the task's index)."""
        ids = [await enqueue(self.s) for _ in range(n)]
        for _ in range(n):  # one at a time: the endpoint takes 100 at once
            (lease,) = await claim(self.s)
            i = ids.index(lease.task_id)
            fields = {
                k: v.format(i=i) if isinstance(v, str) else v for k, v in (match or {}).items()
            }
            body = WaitIn.model_validate(
                {
                    "step": step,
                    "event": "approved",
                    "match": fields,
                    "timeout": timeout,
                    "lookback": lookback,
                }
            )
            _, done, _ = await self.waits.wait(Q, lease.task_id, lease.token, body)
            assert done.state is TaskState.SCHEDULED
        return ids

    async def steps(self, task_id: str) -> dict[str, object]:
        return {step.name: step.result for step in await self.recorded(task_id)}

    async def recorded(self, task_id: str) -> list[TaskStep]:
        view = await TaskReader(self.s.tasks, self.s.queues, self.s.clock).read(Q, task_id)
        return view.steps


@pytest.fixture
async def rig(stores: Stores) -> Rig:
    await make_queue(stores)
    recent = Recent()
    return Rig(
        stores,
        recent,
        Waits(stores.tasks, stores.clock, recent),
        WaitResumer(stores.tasks, stores.clock),
    )


async def index_keys(s: Stores) -> set[str]:
    k = QueueKeys.of(Q)
    return {key for key in (k.waits, k.wait_shapes) if await s.redis.exists(key)}


async def test_a_wait_is_resumed_by_its_event_once_with_the_event_as_the_steps_result(
    rig: Rig,
) -> None:
    (task_id,) = await rig.waiting(match={"invoice": "inv-7"})
    since = rig.s.clock.now_ms()
    view = await TaskReader(rig.s.tasks, rig.s.queues, rig.s.clock).read(Q, task_id)
    assert (view.state, view.attempt) == (TaskState.SCHEDULED, 0)
    assert view.wait is not None
    assert (view.wait.step, view.wait.event, view.wait.match) == (
        "approval",
        "approved",
        {"invoice": "inv-7"},
    )
    assert view.wait.until == view.run_at
    await rig.publish("approved", {"invoice": "inv-8"})  # another invoice: nothing
    assert (await record(rig.s, task_id))["state"] == "scheduled"
    rig.s.clock.advance(5)
    event, touched = await rig.publish("approved", {"invoice": "inv-7", "by": "ann"})
    assert touched == [Touched(Q, task_id, "resumed", "approval")]
    assert await rig.resumer.consume(event) == []  # the same event again: nothing twice
    assert (await rig.publish("approved", {"invoice": "inv-7"}))[1] == []  # nor another
    t = await record(rig.s, task_id)
    assert (t["state"], "wt" in t) == ("queued", False)
    expected = {"id": event.id, "name": "approved", "data": {"invoice": "inv-7", "by": "ann"}}
    assert await rig.steps(task_id) == {"approval": expected}
    (step,) = await rig.recorded(task_id)  # the step says what it waited for, since when
    assert step.wait == StepWait(
        kind="event", by="event", since=to_datetime(since), event="approved"
    )
    assert step.recorded_at == to_datetime(since + 5)
    assert await index_keys(rig.s) == set()
    (lease,) = await claim(rig.s)  # pushed again, with the step among its steps
    assert lease.task_id == task_id


async def test_the_timeout_records_null_and_makes_the_task_ready(rig: Rig) -> None:
    (task_id,) = await rig.waiting(match={"invoice": "inv-1"}, timeout=30)
    rig.s.clock.advance(29_000)
    assert await rig.s.tasks.promote(Q, rig.s.clock.now_ms(), 100) == 0
    rig.s.clock.advance(1_000)
    assert await rig.s.tasks.promote(Q, rig.s.clock.now_ms(), 100) == 1
    assert await rig.steps(task_id) == {"approval": None}
    (step,) = await rig.recorded(task_id)
    assert step.wait is not None
    assert (step.wait.kind, step.wait.by, step.wait.event) == ("event", "timeout", "approved")
    assert step.recorded_at - step.wait.since == timedelta(seconds=30)  # type: ignore[operator]
    assert (await record(rig.s, task_id))["state"] == "queued"
    assert await index_keys(rig.s) == set()
    assert (await rig.publish("approved", {"invoice": "inv-1"}))[1] == []  # too late


async def test_an_event_recorded_between_the_wait_script_and_the_post_check_is_not_lost(
    rig: Rig,
) -> None:
    await enqueue(rig.s)
    (lease,) = await claim(rig.s)
    body = WaitIn(step="s", event="approved", match={"k": 1}, timeout=60)
    # The wait's path, piece by piece: the set, the script...
    await rig.s.tasks.mark_waits(Q, ["approved"])
    wait = rig.waits
    recorded = rig.s.clock.now_ms()
    await rig.s.tasks.wait(
        Q,
        Finish(lease.task_id, lease.token, AttemptOutcome.RELEASED, delay_ms=60_000),
        Wait("s", "approved", canonical({"k": 1}), shape_of({"k": 1}), 0),
        recorded,
    )
    # ... events accepted now, whose consumers have not run yet (their gateways are slow):
    # 150 of the name that do not match, then one that does (past the first page) ...
    rig.s.clock.advance(10_000)
    for _ in range(150):
        rig.recent.add(rig.event("approved", {"k": 2}))
    event = rig.recent.add(rig.event("approved", {"k": 1.0}))
    # ... and the post-check finds it.
    assert await wait.post_check(Q, lease.task_id, body, recorded)
    assert (await record(rig.s, lease.task_id))["state"] == "queued"
    assert await rig.resumer.consume(event) == []  # the event's own path comes second: nothing
    assert (await rig.steps(lease.task_id))["s"] == {
        "id": event.id,
        "name": "approved",
        "data": {"k": 1.0},
    }


async def test_an_event_before_the_wait_counts_only_within_the_lookback(rig: Rig) -> None:
    early = rig.recent.add(rig.event("approved", {"k": "a"}))
    await rig.resumer.consume(early)  # no wait yet: nothing
    rig.s.clock.advance(10_000)
    (ignored,) = await rig.waiting(match={"k": "a"})
    assert (await record(rig.s, ignored))["state"] == "scheduled"
    assert (await rig.resumer.consume(early)) == []  # handed again (the recoverer): still not
    (taken,) = await rig.waiting(match={"k": "a"}, lookback=11)
    assert (await record(rig.s, taken))["state"] == "queued"
    assert (await rig.steps(taken))["approval"] == {
        "id": early.id,
        "name": "approved",
        "data": {"k": "a"},
    }
    assert (await record(rig.s, ignored))["state"] == "scheduled"


async def test_the_lookback_considers_the_100_oldest_events_of_its_window(rig: Rig) -> None:
    """docs/durable.md's lookback limit: a matching event behind 100 others of the name in the
    window does not resume the wait; within the first 100 it does."""
    assert RECENT_LIMIT == 100  # the number the doc gives
    for _ in range(RECENT_LIMIT):
        rig.recent.add(rig.event("approved", {"k": "other"}))
    rig.recent.add(rig.event("approved", {"k": "a"}))  # the 101st
    rig.s.clock.advance(10_000)
    (missed,) = await rig.waiting(match={"k": "a"}, lookback=60)
    assert (await record(rig.s, missed))["state"] == "scheduled"
    (taken,) = await rig.waiting(match={"k": "other"}, lookback=60)
    assert (await rig.steps(taken))["approval"]["id"] == rig.recent.events[0].id  # type: ignore[index]


async def test_one_event_resumes_every_task_waiting_on_it(rig: Rig) -> None:
    same = await rig.waiting(3, match={"order": 9})
    (other,) = await rig.waiting(match={"order": 10})
    (any_one,) = await rig.waiting(step="any")  # an empty match: every event of the name
    (two,) = await rig.waiting(step="both", match={"order": 9, "ok": True})
    _, touched = await rig.publish("approved", {"order": 9, "ok": True, "extra": [1]})
    assert {(t.task_id, t.by) for t in touched} == {
        *((i, "approval") for i in same),
        (any_one, "any"),
        (two, "both"),
    }
    assert (await record(rig.s, other))["state"] == "scheduled"
    _, touched = await rig.publish("approved", {"order": 10})
    assert [t.task_id for t in touched] == [other]
    assert await index_keys(rig.s) == set()


async def test_200_waits_on_200_keys_each_resume_once_with_their_own_data(rig: Rig) -> None:
    ids = await rig.waiting(200, match={"key": "k{i}"})
    order = list(range(200)) * 2  # every event twice, in random order
    random.Random(7).shuffle(order)
    seen: list[str] = []
    events: dict[int, AcceptedEvent] = {}
    for i in order:
        if i in events:
            touched = await rig.resumer.consume(events[i])  # handed again: nothing twice
        else:
            events[i], touched = await rig.publish("approved", {"key": f"k{i}", "n": i})
        seen += [t.task_id for t in touched]
    assert sorted(seen) == sorted(ids)
    for i, task_id in enumerate(ids):
        result = (await rig.steps(task_id))["approval"]
        assert result == {"id": events[i].id, "name": "approved", "data": {"key": f"k{i}", "n": i}}
    assert await index_keys(rig.s) == set()


async def _enqueue_cancel_on(s: Stores, *entries: CancelOn, delay: float | None = None) -> str:
    """A task enqueued with ``entries`` as its cancel_on, made as the enqueue service makes it."""
    spec = TaskCreate(name="t", cancel_on=list(entries), delay=delay)
    task = new_task(spec, s.clock.now_ms(), {}, Q, QueuePolicy())
    await s.tasks.enqueue(Q, [task], s.clock.now_ms())
    return task.id


async def test_cancel_on_cancels_a_queued_or_scheduled_task_at_once(rig: Rig) -> None:
    s = rig.s
    queued = await _enqueue_cancel_on(s, CancelOn(event="refunded", match={"order": 1}))
    later = await _enqueue_cancel_on(
        s,
        CancelOn(event="refunded", match={"order": 2}),
        CancelOn(event="closed"),
        delay=60,
    )
    assert await s.redis.smembers(event_waits("refunded")) == {Q}
    assert await s.redis.smembers(event_waits("closed")) == {Q}
    s.clock.advance(1)
    event, touched = await rig.publish("refunded", {"order": 1})
    assert touched == [Touched(Q, queued, "cancelled", "cancel_on")]
    assert await rig.resumer.consume(event) == []
    assert (await record(s, queued))["state"] == "cancelled"
    assert (await record(s, later))["state"] == "scheduled"
    _, touched = await rig.publish("closed", {"anything": True})
    assert touched == [Touched(Q, later, "cancelled", "cancel_on")]
    assert await index_keys(s) == set()  # both tasks' entries went with their cancel


async def test_cancel_on_requests_cancel_of_a_running_task_which_ends_cancelled(rig: Rig) -> None:
    s = rig.s
    task_id = await _enqueue_cancel_on(s, CancelOn(event="refunded", match={"order": 1}))
    (lease,) = await claim(s)
    s.clock.advance(1)
    event, touched = await rig.publish("refunded", {"order": 1})
    assert touched == [Touched(Q, task_id, "cancel_requested", "cancel_on")]
    assert await rig.resumer.consume(event) == touched  # asked again, and said so
    end = Finish(task_id, lease.token, AttemptOutcome.ERROR, text="stopped", delay_ms=1000)
    done = await s.tasks.finish(Q, end, s.clock.now_ms())
    assert done.state is TaskState.CANCELLED
    assert await rig.resumer.consume(event) == []  # its entries are dropped once it ended
    assert await index_keys(s) == set()


async def test_an_event_before_the_task_was_created_does_not_cancel_it(rig: Rig) -> None:
    event = rig.event("refunded", {"order": 1}, at=rig.s.clock.now_ms() - 1)
    task_id = await _enqueue_cancel_on(rig.s, CancelOn(event="refunded", match={"order": 1}))
    assert await rig.resumer.consume(event) == []
    assert (await record(rig.s, task_id))["state"] == "queued"


async def test_a_waiting_task_cancelled_or_swept_leaves_no_index_entry(rig: Rig) -> None:
    s = rig.s
    (waiting,) = await rig.waiting(match={"k": 1})
    assert await s.tasks.cancel(Q, waiting, s.clock.now_ms())
    assert (await record(s, waiting))["state"] == "cancelled"
    assert await index_keys(s) == set()
    # A task with cancel_on that succeeds keeps its entries until it is swept.
    done_id = await _enqueue_cancel_on(s, CancelOn(event="refunded", match={"order": 3}))
    (lease,) = await claim(s)
    await s.tasks.finish(
        Q, Finish(done_id, lease.token, AttemptOutcome.SUCCEEDED, text="1"), s.clock.now_ms()
    )
    assert await index_keys(s) != set()
    s.clock.advance(400 * 86_400_000)  # past the default retentions
    assert await s.tasks.sweep(Q, s.clock.now_ms(), 100) == 2
    assert await index_keys(s) == set()
