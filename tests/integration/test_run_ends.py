"""How a run ended is recorded with the end of its task (in the queue's outbox, by the script
that ends it) and kept with the run once delivered, so the run reads the same after its task
is swept; a later end wins over an earlier one, in any order of delivery; a task that is not a
run puts nothing in the outbox."""

from __future__ import annotations

import json

from gateway.store.dependencies import DependencyStore
from gateway.store.keys import JobKeys, QueueKeys
from gateway.store.operations import OperationsStore
from gateway.store.run_ends import end_field
from gateway.store.scripts import Scripts
from sdk.wire import AttemptOutcome, JobCreate, RunCreate, RunStatus, TaskCreate

from .test_jobs_firing import Env, Q, env

__all__ = ["env"]  # the fixture, shared with test_jobs_firing

DAY = 86_400_000


async def outbox(e: Env) -> list[object]:
    return [json.loads(raw) for raw in await e.redis.lrange(QueueKeys.of(Q).outbox, 0, -1)]


async def deliver(e: Env) -> None:
    await DependencyStore(e.redis, Scripts(e.redis)).deliver(Q, e.clock.now_ms())


async def sweep(e: Env) -> None:
    """Move past the queue's retention and sweep: the run's task is gone."""
    e.clock.advance(30 * DAY)
    await e.tasks.sweep(Q, e.clock.now_ms(), 100)


async def manual_job(e: Env) -> str:
    job = await e.jobs.create(
        JobCreate.model_validate({"title": "by hand", "task": {"queue": Q, "name": "tick"}})
    )
    return job.id


async def test_a_run_end_goes_through_the_outbox_and_outlives_its_task(env: Env) -> None:
    job_id = await manual_job(env)
    run = await env.jobs.run_now(job_id, RunCreate(), "alice")
    env.clock.advance(1000)
    await env.finish(run.task_id)
    (notice,) = await outbox(env)
    assert notice == {
        "run": job_id,
        "id": run.id,
        "state": "succeeded",
        "att": 1,
        "first": env.clock.now_ms(),
        "finished": env.clock.now_ms(),
    }
    assert await env.redis.hget(JobKeys.of(job_id).run, end_field(run.id)) is None
    await deliver(env)
    assert await outbox(env) == []
    kept = await env.redis.hget(JobKeys.of(job_id).run, end_field(run.id))
    assert json.loads(kept or "null") == {k: v for k, v in notice.items() if k not in ("run", "id")}

    await sweep(env)
    assert await env.tasks.record(Q, run.task_id) is None
    found = await env.jobs.run(job_id, run.id)
    assert (found.status, found.attempts) == (RunStatus.SUCCESS, 1)
    assert found.started_at is not None
    assert found.ended_at is not None

    # A task that is not a run puts nothing in the outbox.
    (plain,) = await env.task_service.enqueue(Q, [TaskCreate(name="tick")])
    await env.finish(plain.id)
    assert await outbox(env) == []


async def test_a_later_end_wins_in_any_order_and_a_deleted_run_keeps_none(env: Env) -> None:
    job_id = await manual_job(env)
    run = await env.jobs.run_now(job_id, RunCreate(), "alice")
    await env.finish(run.task_id, AttemptOutcome.FAILED)  # one attempt: dead
    ops = OperationsStore(env.redis, Scripts(env.redis), env.tasks)
    env.clock.advance(1000)
    await ops.resubmit(Q, [run.task_id], env.clock.now_ms(), reset_attempts=True)
    env.clock.advance(1000)
    await env.finish(run.task_id)
    first, second = await outbox(env)
    assert (first["state"], second["state"]) == ("dead", "succeeded")
    # Two gateways delivering at once: the later end is kept, whichever lands last.
    await env.store.keep_ends([(job_id, run.id, {k: second[k] for k in ("state", "finished")})])
    await env.store.keep_ends([(job_id, run.id, {k: first[k] for k in ("state", "finished")})])
    await deliver(env)
    await sweep(env)
    found = await env.jobs.run(job_id, run.id)
    assert (found.status, found.message) == (RunStatus.SUCCESS, None)

    await env.jobs.delete_run(job_id, run.id)
    assert await env.redis.hgetall(JobKeys.of(job_id).run) == {}
    await env.store.keep_ends([(job_id, run.id, {"state": "succeeded", "finished": 1})])
    assert await env.redis.hgetall(JobKeys.of(job_id).run) == {}


async def test_a_task_enqueued_without_its_job_has_its_end_kept_when_read(env: Env) -> None:
    """Runs whose tasks an earlier version enqueued: their records do not name the job, so
    their end is kept when a read finds the task ended."""
    job_id = await manual_job(env)
    run = await env.jobs.run_now(job_id, RunCreate(), "alice")
    meta = QueueKeys.of(Q).meta
    record = json.loads(await env.redis.hget(meta, run.task_id) or "{}")
    del record["jb"]
    await env.redis.hset(meta, run.task_id, json.dumps(record))
    await env.finish(run.task_id)
    assert await outbox(env) == []
    assert (await env.jobs.run(job_id, run.id)).status is RunStatus.SUCCESS
    await sweep(env)
    found = await env.jobs.run(job_id, run.id)
    assert (found.status, found.attempts) == (RunStatus.SUCCESS, 1)
    assert found.ended_at is not None


async def test_the_sweep_keeps_a_run_whose_end_may_wait_in_the_outbox(env: Env) -> None:
    job_id = await manual_job(env)
    run = await env.jobs.run_now(job_id, RunCreate(), "alice")
    (plain,) = await env.task_service.enqueue(Q, [TaskCreate(name="tick")])
    await env.finish(run.task_id)
    await env.finish(plain.id)
    assert len(await outbox(env)) == 1
    await sweep(env)  # the run's end is not kept yet: its task stays, the other goes
    assert await env.tasks.record(Q, plain.id) is None
    assert await env.tasks.record(Q, run.task_id) is not None
    await deliver(env)
    await sweep(env)
    assert await env.tasks.record(Q, run.task_id) is None
    assert (await env.jobs.run(job_id, run.id)).status is RunStatus.SUCCESS


async def test_a_run_dropped_past_the_runs_kept_takes_its_end_with_it(env: Env) -> None:
    env.store.runs_kept = 2
    job_id = await manual_job(env)
    first = await env.jobs.run_now(job_id, RunCreate(), "alice")
    await env.finish(first.task_id)
    await deliver(env)
    assert await env.redis.hexists(JobKeys.of(job_id).run, end_field(first.id))
    for _ in range(2):
        await env.jobs.run_now(job_id, RunCreate(), "alice")
    fields = await env.redis.hkeys(JobKeys.of(job_id).run)
    assert not [f for f in fields if f.startswith(first.id)]
