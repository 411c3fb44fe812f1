"""Durable HTTP calls against a real Redis and a loopback service, one piece at a time with a
manual clock (docs/durable.md, "A durable HTTP call"): the call recorded and made once, the
task resumed once with the answer, a stale or repeated resume a no-op, a call left by a
gateway with no room (or one that stopped) made again after its lease, the backstop, a cancel,
and the keyspace clean after each."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import cast

import aiohttp
import pytest

from gateway.background.recover_loop import Recoverer
from gateway.dispatch.calls import LEASE_GRACE_MS, CallRunner, backstop_seconds
from gateway.dispatch.pusher import new_session
from gateway.services.calls import Calls
from gateway.store.keys import QueueKeys
from gateway.store.tasks import CancelResult
from sdk.wire import CallIn, TaskState
from tests.call_service import CallService

from .conftest import Stores
from .test_invokes import steps_of, wait_of
from .test_recoverer import Q, claim, enqueue, make_queue, record

TIMEOUT = 10.0


@dataclass
class Rig:
    s: Stores
    service: CallService
    session: aiohttp.ClientSession

    def runner(self, room: int = 8) -> CallRunner:
        return CallRunner(
            self.s.tasks,
            self.session,
            self.s.clock,
            max_in_flight=room,
            max_body=1024,
            allow_private=True,
        )

    async def call(
        self, runner: CallRunner, path: str = "/echo", step: str = "api", **fields: object
    ) -> str:
        """A task enqueued, claimed and asking for a call; returns its id."""
        task_id = await enqueue(self.s)
        (lease,) = await claim(self.s)
        body = CallIn.model_validate(
            {"step": step, "url": self.service.url + path, "timeout": TIMEOUT, **fields}
        )
        _, done, _ = await Calls(self.s.tasks, runner, self.s.clock).call(
            Q, task_id, lease.token, body
        )
        assert done.state is TaskState.SCHEDULED
        return task_id

    async def calls(self) -> dict[str, float]:
        """The queue's calls and their leases ({} once the key is gone: nothing leaks)."""
        key = QueueKeys.of(Q).calls
        pairs = cast(
            list[tuple[str, float]], await self.s.redis.zrange(key, 0, -1, withscores=True)
        )
        found = dict(pairs)
        assert bool(found) == bool(await self.s.redis.exists(key))
        return found


@pytest.fixture
def service() -> Iterator[CallService]:
    with CallService() as service:
        yield service


@pytest.fixture
async def rig(stores: Stores, service: CallService) -> AsyncIterator[Rig]:
    await make_queue(stores)
    async with new_session(allow_private=True) as session:
        yield Rig(stores, service, session)


async def test_a_call_is_made_once_and_resumes_its_task_with_the_answer(rig: Rig) -> None:
    s, runner = rig.s, rig.runner()
    task_id = await rig.call(runner, json={"amount": 3}, method="POST", headers={"X-A": "b"})
    wt = (await record(s, task_id))["wt"]
    assert (wt["k"], wt["s"]) == ("call", "api")  # type: ignore[index]
    await runner.settled()
    assert rig.service.count() == 1
    seen = rig.service.seen[0]
    assert (seen.method, seen.key, seen.headers["x-a"]) == ("POST", f"{task_id}:api", "b")
    assert json.loads(seen.body) == {"amount": 3}
    assert seen.headers["content-type"] == "application/json"
    found = (await steps_of(s, task_id))["api"]
    assert isinstance(found, dict)
    assert found["status"] == 200
    assert found["headers"]["x-seen"] == "1"
    assert found["body"] == {
        "n": 1,
        "method": "POST",
        "key": f"{task_id}:api",
        "body": seen.body.decode(),
    }
    rec = await record(s, task_id)
    assert (rec["state"], "wt" in rec) == ("queued", False)
    wait = await wait_of(s, task_id)  # what the timeline draws
    assert wait is not None
    assert wait.call is not None
    assert (wait.kind, wait.by, wait.call.method) == ("call", "call", "POST")
    assert wait.call.url == rig.service.url + "/echo"
    assert wait.since is not None
    assert await rig.calls() == {}
    # A second resume (the call made twice: at-least-once) changes nothing.
    again = await s.tasks.resume_call(Q, task_id, "api", '{"status":500}', s.clock.now_ms())
    assert again is False
    assert (await steps_of(s, task_id))["api"] == found


async def test_a_resume_for_another_step_or_task_is_a_no_op(rig: Rig) -> None:
    s, runner = rig.s, rig.runner(room=0)  # no room: nothing is made here
    task_id = await rig.call(runner)
    assert not await s.tasks.resume_call(Q, task_id, "other", "1", s.clock.now_ms())
    assert not await s.tasks.resume_call(Q, "nope", "api", "1", s.clock.now_ms())
    assert (await record(s, task_id))["state"] == "scheduled"
    assert list(await rig.calls()) == [task_id]
    assert rig.service.count() == 0


async def test_a_call_without_room_is_made_at_once_by_a_recoverer_with_room(rig: Rig) -> None:
    """The gateway that recorded it had no room: the call is recorded with its lease already
    out, so the next step of a recoverer with room claims it and makes it."""
    s = rig.s
    task_id = await rig.call(rig.runner(room=0))
    assert (await rig.calls())[task_id] == s.clock.now_ms()
    runner = rig.runner()
    report = await Recoverer(s.tasks, s.queues, s.clock, calls=runner).step(s.clock.now_ms())
    assert report.calls == 1
    await runner.settled()
    assert rig.service.count() == 1
    assert (await steps_of(s, task_id))["api"]["status"] == 200  # type: ignore[index]
    assert (await record(s, task_id))["state"] == "queued"
    assert await rig.calls() == {}


async def test_a_call_its_gateway_stopped_making_is_made_again_after_its_lease(rig: Rig) -> None:
    """A gateway took the call (its lease renewed to one try's timeout and the grace), then
    stopped: the recoverer leaves it alone until that lease runs out, then makes it."""
    s = rig.s
    task_id = await rig.call(rig.runner(room=0))
    lease = s.clock.now_ms() + TIMEOUT * 1000 + LEASE_GRACE_MS
    assert await s.tasks.renew_call(Q, task_id, lease)  # what the stopped gateway had done
    runner = rig.runner()
    recoverer = Recoverer(s.tasks, s.queues, s.clock, calls=runner)
    await recoverer.step(s.clock.now_ms())
    assert runner.in_flight == 0  # not yet due
    assert rig.service.count() == 0
    s.clock.advance(int(lease) - s.clock.now_ms())
    report = await recoverer.step(s.clock.now_ms())
    assert report.calls == 1
    await runner.settled()
    assert rig.service.count() == 1
    assert (await rig.calls()) == {}


async def test_the_backstop_resumes_with_timed_out_and_drops_the_call(rig: Rig) -> None:
    s = rig.s
    task_id = await rig.call(rig.runner(room=0))
    s.clock.advance(int(backstop_seconds(TIMEOUT) * 1000))
    await Recoverer(s.tasks, s.queues, s.clock).step(s.clock.now_ms())
    found = (await steps_of(s, task_id))["api"]
    assert found == {"error": "no answer was recorded within 100s", "kind": "timed_out"}
    assert (await record(s, task_id))["state"] == "queued"
    assert await rig.calls() == {}
    assert not await s.tasks.resume_call(Q, task_id, "api", "1", s.clock.now_ms())


async def test_a_cancel_removes_the_call_and_a_late_answer_changes_nothing(rig: Rig) -> None:
    s = rig.s
    task_id = await rig.call(rig.runner(room=0))
    assert await s.tasks.cancel(Q, task_id, s.clock.now_ms()) is CancelResult.CANCELLED
    assert await rig.calls() == {}
    assert not await s.tasks.resume_call(Q, task_id, "api", "1", s.clock.now_ms())
    assert (await record(s, task_id))["state"] == "cancelled"
    assert "api" not in await steps_of(s, task_id)


async def test_a_claim_drops_entries_of_tasks_that_no_longer_wait_for_a_call(rig: Rig) -> None:
    s = rig.s
    task_id = await rig.call(rig.runner(room=0))
    await s.redis.zadd(QueueKeys.of(Q).calls, {"gone": 1})  # a task since deleted, say
    s.clock.advance(int(TIMEOUT * 1000) + LEASE_GRACE_MS)
    claimed = await s.tasks.claim_calls(Q, s.clock.now_ms(), 10, LEASE_GRACE_MS)
    assert [(c.task_id, c.step) for c in claimed] == [(task_id, "api")]
    assert CallIn.model_validate_json(claimed[0].request).url == rig.service.url + "/echo"
    lease = s.clock.now_ms() + TIMEOUT * 1000 + LEASE_GRACE_MS
    assert await rig.calls() == {task_id: lease}
    assert claimed[0].lease_until_ms == lease
    # Leased again: not claimed a second time before that lease runs out.
    assert await s.tasks.claim_calls(Q, s.clock.now_ms(), 10, LEASE_GRACE_MS) == []
