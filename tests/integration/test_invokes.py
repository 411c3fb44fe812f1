"""Invoking a child task against a real Redis, one piece at a time with a manual clock
(docs/durable.md, "Invoking a task"): the invoke path (:class:`Invokes`), the child's end
carried to the parent through the outbox (the recoverer's delivery), the child a stopped
gateway never enqueued, and a child in another queue."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from gateway.background.recover_loop import Recoverer
from gateway.caches.directory import Directory
from gateway.services.invokes import Invokes, child_id
from gateway.services.tasks import TaskService
from gateway.store.dependencies import DependencyStore
from gateway.store.keys import QueueKeys
from gateway.store.pubsub import Notifier
from gateway.store.records import steps_from_json, to_datetime
from gateway.store.scripts import Scripts
from gateway.store.tasks import Finish
from sdk.wire import AttemptOutcome, InvokeIn, StepWait, TaskChild, TaskState

from .conftest import Stores
from .test_recoverer import Q, claim, enqueue, make_queue, record


@dataclass
class Rig:
    s: Stores
    invokes: Invokes
    recoverer: Recoverer

    async def invoke(self, step: str = "child", queue: str | None = None) -> tuple[str, str]:
        """A task enqueued, claimed and invoking a child; returns (parent id, child id)."""
        parent = await enqueue(self.s)
        (lease,) = await claim(self.s)
        body = InvokeIn(step=step, queue=queue, name="kid", payload={"args": [1]}, timeout=60)
        _, done, _ = await self.invokes.invoke(Q, parent, lease.token, body)
        assert done.state is TaskState.SCHEDULED
        return parent, child_id(parent, step)

    async def run(self, queue: str, outcome: AttemptOutcome, text: str) -> str:
        """Claim the one ready task of ``queue`` and end its attempt so."""
        (lease,) = await claim(self.s, queue=queue)
        finish = Finish(lease.task_id, lease.token, outcome, text=text)
        await self.s.tasks.finish(queue, finish, self.s.clock.now_ms())
        return lease.task_id

    async def deliver(self) -> None:
        await self.recoverer.step(self.s.clock.now_ms())


@pytest.fixture
async def rig(stores: Stores) -> Rig:
    s = stores
    scripts = Scripts(s.redis)
    await scripts.load()
    dependencies = DependencyStore(s.redis, scripts)
    service = TaskService(
        s.tasks,
        s.queues,
        Directory(s.queues),
        s.clock,
        Notifier(s.redis, on_wake=lambda q, n: None),
        dependencies,
        on_ready=lambda q, n: None,
    )
    invokes = Invokes(s.tasks, service, s.clock)
    dependencies.on_invoke = invokes.deliver
    recoverer = Recoverer(s.tasks, s.queues, s.clock, dependencies=dependencies)
    await make_queue(s)
    return Rig(s, invokes, recoverer)


async def steps_of(s: Stores, task_id: str, queue: str = Q) -> dict[str, object]:
    raw = await s.redis.hget(QueueKeys.of(queue).steps, task_id)
    return {x["name"]: x["result"] for x in json.loads(raw or "[]")}


async def wait_of(s: Stores, task_id: str) -> StepWait | None:
    """How the wait of the task's one step ended, as the API shows it."""
    (step,) = steps_from_json(await s.redis.hget(QueueKeys.of(Q).steps, task_id))
    return step.wait


async def test_a_child_that_succeeds_resumes_its_parent_once_with_its_result(rig: Rig) -> None:
    s = rig.s
    parent, child = await rig.invoke()
    since = to_datetime(s.clock.now_ms())
    assert (await record(s, parent))["wt"]["c"] == child  # type: ignore[index]
    kid = await record(s, child)
    assert kid["par"] == {"q": Q, "id": parent, "s": "child"}
    s.clock.advance(1)
    assert await rig.run(Q, AttemptOutcome.SUCCEEDED, '{"sum":3}') == child
    await rig.deliver()
    assert (await record(s, parent))["state"] == "queued"
    assert await steps_of(s, parent) == {
        "child": {"state": "succeeded", "id": child, "result": {"sum": 3}}
    }
    kid_of = TaskChild(queue=Q, id=child)
    assert await wait_of(s, parent) == StepWait(
        kind="invoke", by="child", since=since, child=kid_of
    )
    # The same end again (an outbox delivered twice), or the timeout: nothing more.
    await s.tasks.resume_child(Q, parent, child, '{"state":"x"}', s.clock.now_ms())
    s.clock.advance(120_000)
    await rig.deliver()
    assert (await steps_of(s, parent))["child"]["state"] == "succeeded"  # type: ignore[index]
    assert await s.redis.llen(QueueKeys.of(Q).outbox) == 0


async def test_a_child_that_fails_says_so_in_the_step(rig: Rig) -> None:
    s = rig.s
    parent, child = await rig.invoke()
    await rig.run(Q, AttemptOutcome.FAILED, "boom")
    await rig.deliver()
    step = (await steps_of(s, parent))["child"]
    assert step == {"state": "dead", "id": child, "error": "boom"}  # (dead-lettered)


async def test_the_timeout_records_timed_out_and_a_later_end_changes_nothing(rig: Rig) -> None:
    s = rig.s
    parent, child = await rig.invoke()
    s.clock.advance(61_000)
    await rig.deliver()
    assert (await steps_of(s, parent))["child"]["state"] == "timed_out"  # type: ignore[index]
    wait = await wait_of(s, parent)
    assert wait is not None
    assert (wait.kind, wait.by, wait.child) == ("invoke", "timeout", TaskChild(queue=Q, id=child))
    leases = await claim(s, 2)  # the parent and the child: both ready
    kid = next(x for x in leases if x.task_id == child)
    finish = Finish(kid.task_id, kid.token, AttemptOutcome.SUCCEEDED, text="1")
    await s.tasks.finish(Q, finish, s.clock.now_ms())
    await rig.deliver()
    assert (await steps_of(s, parent))["child"]["state"] == "timed_out"  # type: ignore[index]


async def test_the_recoverer_enqueues_a_child_a_stopped_gateway_never_enqueued(
    rig: Rig,
) -> None:
    s = rig.s
    parent = await enqueue(s)
    (lease,) = await claim(s)
    body = InvokeIn(step="child", name="kid", timeout=60)

    class Stopped(Invokes):
        async def enqueue_children(self, entries: object) -> None:
            raise SystemExit  # the gateway stops right after the script

    stopped = Stopped(s.tasks, rig.invokes.task_service, s.clock)
    with pytest.raises(SystemExit):
        await stopped.invoke(Q, parent, lease.token, body)
    child = child_id(parent, "child")
    assert await s.tasks.record(Q, child) is None
    await rig.deliver()
    assert (await record(s, child))["state"] == "queued"
    await rig.deliver()  # a second delivery: the entry is gone, and it would be a no-op
    await rig.run(Q, AttemptOutcome.SUCCEEDED, "7")
    await rig.deliver()
    assert (await steps_of(s, parent))["child"]["result"] == 7  # type: ignore[index]


async def test_a_child_in_another_queue(rig: Rig) -> None:
    s = rig.s
    await make_queue(s, "other")
    parent, child = await rig.invoke(queue="other")
    assert (await record(s, child, "other"))["state"] == "queued"
    await rig.run("other", AttemptOutcome.SUCCEEDED, '"done"')
    await rig.deliver()
    assert (await steps_of(s, parent))["child"]["result"] == "done"  # type: ignore[index]
    assert (await record(s, parent))["state"] == "queued"


async def test_a_child_refused_for_good_resumes_its_parent_refused(rig: Rig) -> None:
    s = rig.s
    parent, child = await rig.invoke(queue="nowhere")
    step = (await steps_of(s, parent))["child"]
    assert step["state"] == "refused"  # type: ignore[index]
    assert step["id"] == child  # type: ignore[index]


async def test_a_cancelled_parent_cancels_its_waiting_child_through_the_outbox(
    rig: Rig,
) -> None:
    """A parent cancelled while it waits (the API's, a bulk's or a cancel_on's cancel: one
    script) cancels its child in the child's queue, delivered by the recoverer from the
    parent queue's outbox, whatever gateway runs it: a queued child at once, a running one by
    a cancel request. The child's end then finds no wait, and a second delivery does nothing."""
    s = rig.s
    await make_queue(s, "other")
    queued_parent, queued_child = await rig.invoke(step="a", queue="other")
    running_parent, running_child = await rig.invoke(step="b")
    (lease,) = await claim(s)  # the second child (queue Q) is running
    assert lease.task_id == running_child
    for parent in (queued_parent, running_parent):
        assert await s.tasks.cancel(Q, parent, s.clock.now_ms()) == "CANCELLED"
    # Nothing cancelled the children yet: the cancel is in the parent queue's outbox (a
    # gateway that stops now leaves it there for any recoverer).
    assert (await record(s, queued_child, "other"))["state"] == "queued"
    assert "cancel" not in await record(s, running_child)
    await rig.deliver()
    kid = await record(s, queued_child, "other")
    assert kid["state"] == "cancelled"
    assert (await record(s, running_child))["cancel"] is True  # asked to stop
    finish = Finish(running_child, lease.token, AttemptOutcome.ERROR, text="stopped")
    assert (await s.tasks.finish(Q, finish, s.clock.now_ms())).state is TaskState.CANCELLED
    await rig.deliver()  # the children's ends reach parents that no longer wait
    for parent in (queued_parent, running_parent):
        t = await record(s, parent)
        assert (t["state"], "wt" in t) == ("cancelled", False)
        assert await steps_of(s, parent) == {}
    assert await s.redis.llen(QueueKeys.of(Q).outbox) == 0
    assert await s.redis.llen(QueueKeys.of("other").outbox) == 0


async def test_a_cancelled_parent_whose_wait_timed_out_leaves_the_child_alone(rig: Rig) -> None:
    s = rig.s
    parent, child = await rig.invoke()
    s.clock.advance(61_000)
    await rig.deliver()  # the timeout: the parent is ready again, its wait over
    assert await s.tasks.cancel(Q, parent, s.clock.now_ms()) == "CANCELLED"
    await rig.deliver()
    assert (await record(s, child))["state"] == "queued"
