"""Runs whose gateway stopped between the claim and the enqueue of their task: every one is
resumed (each job keeps a set of pending runs, not one field), with each overlap policy and for
run now; a run resumed twice is still one task; a pending run stored by an older version is
resumed after an upgrade. A stopped gateway is a task service whose enqueue raises."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime
from typing import Any

import pytest

from gateway.core.errors import FieldProblem, ValidationFailed
from gateway.store.keys import JOBS_DUE, JobKeys
from sdk.wire import RunCreate, RunStatus, TaskState

from .test_jobs_firing import SECOND, START, Env, Q, at, env, every

__all__ = ["env"]  # the fixture, shared with test_jobs_firing


async def stopped(*args: Any, **kwargs: Any) -> Any:
    raise ConnectionError("the gateway stopped before the enqueue")


async def task_states(env: Env, job_id: str) -> dict[str, tuple[str | None, datetime | None]]:
    """Each run's task state (None: no task), by run id, with the run's fire time."""
    page = await env.jobs.runs_page(job_id, None, None, 500)
    return {
        run.id: ((await env.tasks.record(Q, run.id) or {}).get("state"), run.fire_time)
        for run in page.items
    }


async def test_every_run_begun_by_a_stopped_gateway_is_resumed_with_overlap_allow(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = await env.jobs.create(every(seconds=5, overlap="allow"))
    with monkeypatch.context() as m:
        m.setattr(env.task_service, "enqueue", stopped)
        for _ in range(3):
            env.clock.advance(5 * SECOND)
            assert (await env.step()).errors == 1
        with pytest.raises(ConnectionError):
            await env.jobs.run_now(job.id, RunCreate(), "alice")
    stored = await env.store.get(job.id)
    assert stored is not None
    assert len(stored.pending) == 4
    assert [status for status, _ in await env.states(job.id)] == [RunStatus.PENDING] * 4
    env.clock.advance(env.store.resume_ms)  # 30 s after the last of them: all four are due
    report = await env.step()
    assert report.resumed == 4
    states = await task_states(env, job.id)
    assert {state for state, _ in states.values()} == {TaskState.QUEUED}
    fired = sorted(fire for _, fire in states.values() if fire is not None)
    assert fired == [at(START + k * 5 * SECOND) for k in range(1, 10)]  # each fire time once
    assert len(states) == len(fired) + 1  # and the run now
    assert (await env.store.get(job.id)).pending == ()  # type: ignore[union-attr]
    assert (await env.step()).resumed == 0


async def test_a_run_interrupted_by_redis_here_is_resumed_as_soon_as_redis_is_back(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    # This gateway claimed the firing, then Redis went away before the enqueue (the enqueue
    # raises). The gateway lives on: once its pub/sub connection is back (reconnected), its next
    # step enqueues the run's task at once, not resume_ms (30 s) after the claim.
    job = await env.jobs.create(every(seconds=5, overlap="allow"))
    firing = env.firing()
    with monkeypatch.context() as m:
        m.setattr(env.task_service, "enqueue", stopped)
        env.clock.advance(5 * SECOND)
        assert (await firing.step()).errors == 1
    env.clock.advance(SECOND)
    assert (await firing.step()).resumed == 0  # no word that Redis is back: resume_ms applies
    firing.reconnected()
    assert (await firing.step()).resumed == 1
    states = await task_states(env, job.id)
    assert [(state, fire) for state, fire in states.values()] == [
        (TaskState.QUEUED, at(START + 5 * SECOND))
    ]
    stored = await env.store.get(job.id)
    assert stored is not None
    assert stored.pending == ()
    assert env.runs.interrupted(job.id) == frozenset()


@pytest.mark.parametrize("overlap", ["skip", "queue_one"])
async def test_a_run_now_after_a_stopped_firing_loses_neither(
    env: Env, monkeypatch: pytest.MonkeyPatch, overlap: str
) -> None:
    job = await env.jobs.create(every(seconds=5, overlap=overlap))
    with monkeypatch.context() as m:
        m.setattr(env.task_service, "enqueue", stopped)
        env.clock.advance(5 * SECOND)
        assert (await env.step()).errors == 1  # the firing at +5 s is claimed, not enqueued
        env.clock.advance(5 * SECOND)
        report = await env.step()  # +10 s: the run of +5 s is pending
        assert (report.skipped, report.held) == ((1, 0) if overlap == "skip" else (0, 1))
        with pytest.raises(ConnectionError):
            await env.jobs.run_now(job.id, RunCreate(), "alice")
    env.clock.advance(env.store.resume_ms)
    report = await env.step()
    assert report.resumed == 2
    assert report.fired == 0  # the run now is queued: every later firing is skipped
    states = await task_states(env, job.id)
    assert len(states) == 2
    assert {state for state, _ in states.values()} == {TaskState.QUEUED}
    for run_id in states:  # both end: the held firing (queue_one) is released, once
        await env.finish(run_id)
    env.clock.advance(5 * SECOND)
    report = await env.step()
    states = await task_states(env, job.id)
    made = [fire for state, fire in states.values() if state == TaskState.QUEUED]
    if overlap == "queue_one":
        assert (report.released, report.held) == (1, 1)
        assert made == [at(START + 10 * SECOND)]
    else:
        assert report.fired == 1
        assert made == [at(START + 45 * SECOND)]
    assert len(states) == 3


async def test_two_gateways_resuming_one_run_make_one_task(env: Env) -> None:
    job = await env.jobs.create(every(minutes=1).model_copy(update={"schedule": None}))
    with pytest.MonkeyPatch.context() as m:
        m.setattr(env.task_service, "enqueue", stopped)
        with pytest.raises(ConnectionError):
            await env.jobs.run_now(job.id, RunCreate(), "alice")
    ((run_id, _),) = (await env.store.get(job.id)).pending  # type: ignore[union-attr]
    now = env.clock.now_ms()
    await asyncio.gather(*(env.runs.resume(job.id, [run_id], now) for _ in range(2)))
    assert (await env.tasks.record(Q, run_id) or {}).get("state") == TaskState.QUEUED
    assert await env.redis.zcard(f"jg:{{{Q}}}:ready") == 1
    assert (await env.store.get(job.id)).pending == ()  # type: ignore[union-attr]
    await env.runs.resume(job.id, [run_id], now)  # once more, after it left the set
    assert await env.redis.zcard(f"jg:{{{Q}}}:ready") == 1


async def test_a_pending_run_stored_by_an_older_version_is_resumed(env: Env) -> None:
    job = await env.jobs.create(every(minutes=1).model_copy(update={"schedule": None}))
    k = JobKeys.of(job.id)
    run_id = "01JX0000000000000000000000"
    record = {"job": job.id, "title": "t", "by": "system", "queue": Q, "name": "tick"}
    # What the previous version left: one ``pending`` field in the job hash, no pending set.
    await env.redis.hset(k.run, run_id, json.dumps({**record, "args": 1, "created": START}))
    await env.redis.zadd(k.runs, {run_id: START})
    await env.redis.hset(k.job, mapping={"last": run_id, "pending": f"{run_id} {START}"})
    assert (await env.jobs.run(job.id, run_id)).status is RunStatus.PENDING
    await env.store.touch(job.id, START)  # any job script moves it into the set
    assert not await env.redis.hexists(k.job, "pending")
    assert await env.redis.zscore(k.pending, run_id) == START
    env.clock.advance(env.store.resume_ms)
    assert (await env.step()).resumed == 1
    assert (await env.tasks.record(Q, run_id) or {}).get("state") == TaskState.QUEUED
    assert await env.redis.exists(k.pending) == 0


async def test_a_run_whose_task_is_refused_for_good_fails_instead_of_waiting(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = await env.jobs.create(every(minutes=1).model_copy(update={"schedule": None}))
    with monkeypatch.context() as m:
        m.setattr(env.task_service, "enqueue", stopped)
        with pytest.raises(ConnectionError):
            await env.jobs.run_now(job.id, RunCreate(), "alice")

    async def refused(*args: Any, **kwargs: Any) -> Any:
        raise ValidationFailed([FieldProblem("payload.days", "is required")])

    monkeypatch.setattr(env.task_service, "enqueue", refused)  # e.g. the task's schema changed
    env.clock.advance(env.store.resume_ms)
    assert (await env.step()).resumed == 1
    (run,) = (await env.jobs.runs_page(job.id, None, None, 10)).items
    assert (run.status, run.message) == (RunStatus.FAILURE, "payload.days: is required")
    assert (await env.store.get(job.id)).pending == ()  # type: ignore[union-attr]
    assert await env.redis.zscore(JOBS_DUE, job.id) is None  # nothing left to do


async def test_a_pending_run_keeps_its_record_past_the_runs_kept(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    env.store.runs_kept = 1
    job = await env.jobs.create(every(seconds=5, overlap="allow"))
    with monkeypatch.context() as m:
        m.setattr(env.task_service, "enqueue", stopped)
        for _ in range(2):
            env.clock.advance(5 * SECOND)
            assert (await env.step()).errors == 1
    stored = await env.store.get(job.id)
    assert stored is not None
    begun = [run_id for run_id, _ in stored.pending]
    assert len(begun) == 2
    env.clock.advance(env.store.resume_ms)
    report = await env.step()
    assert (report.resumed, report.fired) == (2, 6)  # then +15 s ... +40 s
    for run_id in begun:
        assert (await env.tasks.record(Q, run_id) or {}).get("state") == TaskState.QUEUED
    assert len((await env.jobs.runs_page(job.id, None, None, 10)).items) == 1  # kept: the last
