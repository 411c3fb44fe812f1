"""The firing loop against a real Redis, one step at a time with a manual clock: exactly-once
claims, coalescing after downtime, catching up, overlap policies, templated args, resuming a
half-made run, and edits taking effect at once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest
from redis.asyncio import Redis

from gateway.background.job_firing import Firing
from gateway.caches.directory import Directory
from gateway.services.jobs import JobService
from gateway.services.logs import LogService
from gateway.services.runs import Runs
from gateway.services.tasks import TaskService
from gateway.store.clock import ManualClock
from gateway.store.dependencies import DependencyStore
from gateway.store.endpoint_records import EndpointRecord
from gateway.store.jobs import JobStore
from gateway.store.keys import JOBS_DUE
from gateway.store.pubsub import Notifier
from gateway.store.queues import QueueStore
from gateway.store.scripts import Scripts
from gateway.store.tasks import Finish, TaskStore
from sdk.wire import (
    LAST_SUCCESSFUL_RUN,
    AttemptOutcome,
    JobCreate,
    JobPatch,
    QueuePolicy,
    RunCreate,
    RunStatus,
    TaskState,
)

Q = "jobs-q"
START = 1_800_000_000_000  # 2027-01-15T08:00:00Z: a whole minute
SECOND = 1000
MINUTE = 60 * SECOND


@dataclass
class Env:
    redis: Redis
    clock: ManualClock
    store: JobStore
    tasks: TaskStore
    jobs: JobService
    runs: Runs
    task_service: TaskService

    def firing(self, grace_ms: int = 30_000) -> Firing:
        return Firing(self.store, self.runs, self.clock, grace_ms=grace_ms)

    async def step(self, **kw: Any) -> Any:
        return await self.firing(**kw).step()

    async def states(self, job_id: str) -> list[tuple[RunStatus, datetime | None]]:
        page = await self.jobs.runs_page(job_id, None, None, 500)
        return [(r.status, r.fire_time) for r in reversed(page.items)]

    async def finish(
        self, task_id: str, outcome: AttemptOutcome = AttemptOutcome.SUCCEEDED
    ) -> None:
        """Run the task (claim it) and end its attempt."""
        claim = await self.tasks.claim(Q, 100, "seed", self.clock.now_ms())
        leases = {lease.task_id: lease for lease in claim.leases}
        lease = leases[task_id]
        text = "null" if outcome is AttemptOutcome.SUCCEEDED else "broken"
        await self.tasks.finish(
            Q, Finish(task_id, lease.token, outcome, text=text), self.clock.now_ms()
        )
        for other in leases.values():
            if other.task_id != task_id:
                await self.tasks.finish(
                    Q,
                    Finish(other.task_id, other.token, AttemptOutcome.RELEASED),
                    self.clock.now_ms(),
                )


@pytest.fixture
async def env(redis_url: str) -> AsyncIterator[Env]:
    redis = Redis.from_url(redis_url, decode_responses=True)
    scripts = Scripts(redis)
    await scripts.load()
    clock = ManualClock(START)
    tasks = TaskStore(redis, scripts)
    queues = QueueStore(redis, scripts)
    await queues.put(Q, QueuePolicy(max_attempts=1), clock.now_ms())
    await queues.add_endpoint(
        EndpointRecord(
            id="ep1",
            queue=Q,
            url="http://127.0.0.1:1/",
            concurrency=100,
            capabilities=[],
            secrets=["whsec_x"],
            created_ms=clock.now_ms(),
        )
    )
    task_service = TaskService(
        tasks,
        queues,
        Directory(queues),
        clock,
        Notifier(redis, on_wake=lambda q, n: None),
        DependencyStore(redis, scripts),
        on_ready=lambda q, n: None,
    )
    store = JobStore(redis, scripts)
    runs = Runs(store, task_service)
    yield Env(
        redis,
        clock,
        store,
        tasks,
        JobService(store, runs, queues, task_service, clock, LogService(tasks)),
        runs,
        task_service,
    )
    await redis.aclose()


def every(seconds: int = 0, minutes: int = 0, **job: Any) -> JobCreate:
    anchor = datetime.fromtimestamp((START + seconds * SECOND + minutes * MINUTE) / 1000, UTC)
    return JobCreate.model_validate(
        {
            "title": "tick",
            "task": {"queue": Q, "name": "tick"},
            "schedule": {
                "kind": "interval",
                "seconds": seconds,
                "minutes": minutes,
                "start_at": anchor.isoformat(),
            },
            **job,
        }
    )


def at(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)


async def test_each_fire_time_makes_one_run_with_three_loops_stepping_at_once(env: Env) -> None:
    job = await env.jobs.create(every(seconds=1, overlap="allow"))
    loops = [env.firing() for _ in range(3)]
    for _ in range(10):
        env.clock.advance(SECOND)
        reports = await asyncio.gather(*(loop.step() for loop in loops))
        assert sum(r.fired for r in reports) == 1
    fires = [fire for _, fire in await env.states(job.id)]
    assert fires == [at(START + k * SECOND) for k in range(1, 11)]
    assert (await env.jobs.get(job.id)).run_count == 10


async def test_fire_times_missed_in_downtime_are_coalesced_into_one_run(env: Env) -> None:
    job = await env.jobs.create(every(minutes=1, overlap="allow"))
    env.clock.advance(60 * MINUTE + 45 * SECOND)  # every gateway was down for an hour
    report = await env.step()
    assert (report.fired, report.coalesced) == (1, 1)
    runs = (await env.jobs.runs_page(job.id, None, None, 50)).items
    assert [r.fire_time for r in runs] == [at(START + 60 * MINUTE)]  # the latest missed
    assert (await env.jobs.get(job.id)).next_run == at(START + 61 * MINUTE)
    assert (await env.step()).fired == 0


async def test_a_late_loop_catches_up_one_run_per_fire_time_within_the_grace(env: Env) -> None:
    job = await env.jobs.create(every(seconds=1, overlap="allow"))
    env.clock.advance(5 * SECOND + 500)
    assert (await env.step()).fired == 5
    assert [f for _, f in await env.states(job.id)] == [at(START + k * SECOND) for k in range(1, 6)]


async def test_overlap_skip_makes_no_run_while_the_previous_runs(env: Env) -> None:
    job = await env.jobs.create(every(minutes=1))
    env.clock.advance(MINUTE)
    assert (await env.step()).fired == 1
    env.clock.advance(MINUTE)
    assert (await env.step()).skipped == 1
    found = await env.jobs.get(job.id)
    assert (found.run_count, found.skipped_count) == (1, 1)
    assert found.next_run == at(START + 3 * MINUTE)
    (run,) = (await env.jobs.runs_page(job.id, None, None, 50)).items
    await env.finish(run.task_id)
    env.clock.advance(MINUTE)
    assert (await env.step()).fired == 1


async def test_overlap_queue_one_holds_one_firing_until_the_previous_ends(env: Env) -> None:
    job = await env.jobs.create(every(minutes=1, overlap="queue_one"))
    env.clock.advance(MINUTE)
    await env.step()
    env.clock.advance(MINUTE)
    assert (await env.step()).held == 1
    env.clock.advance(MINUTE)
    assert (await env.step()).skipped == 1  # one is held already
    assert (await env.step()).released == 0  # the first still runs
    first = (await env.jobs.runs_page(job.id, None, None, 50)).items[0]
    await env.finish(first.task_id, AttemptOutcome.FAILED)
    env.clock.advance(SECOND)
    assert (await env.step()).released == 1
    assert await env.states(job.id) == [
        (RunStatus.FAILURE, at(START + MINUTE)),
        (RunStatus.PENDING, at(START + 2 * MINUTE)),
    ]
    assert (await env.jobs.get(job.id)).skipped_count == 1


async def test_overlap_allow_runs_beside_the_previous(env: Env) -> None:
    job = await env.jobs.create(every(minutes=1, overlap="allow"))
    for _ in range(3):
        env.clock.advance(MINUTE)
        await env.step()
    assert [s for s, _ in await env.states(job.id)] == [RunStatus.PENDING] * 3


async def test_last_successful_run_is_resolved_when_a_run_is_made(env: Env) -> None:
    spec = every(minutes=1, args={"since": LAST_SUCCESSFUL_RUN, "keep": "{{ other }}"})
    job = await env.jobs.create(spec.model_copy(update={"schedule": None}))
    first = await env.jobs.run_now(job.id, RunCreate(), "alice")
    assert first.args == {"since": None, "keep": "{{ other }}"}
    env.clock.advance(5 * SECOND)
    await env.finish(first.task_id)  # started (claimed) at START + 5 s
    env.clock.advance(SECOND)
    failed = await env.jobs.run_now(job.id, RunCreate(), "alice")
    await env.finish(failed.task_id, AttemptOutcome.FAILED)
    third = await env.jobs.run_now(job.id, RunCreate(), "alice")
    assert third.args == {"since": "2027-01-15T08:00:05Z", "keep": "{{ other }}"}
    # the snapshot stays: the task got the resolved args
    task = await env.tasks.read(Q, third.task_id)
    assert task is not None
    assert task[1] == '{"since":"2027-01-15T08:00:05Z","keep":"{{ other }}"}'
    # given args are not templated
    given = await env.jobs.run_now(job.id, RunCreate(args=[LAST_SUCCESSFUL_RUN]), "alice")
    assert given.args == [LAST_SUCCESSFUL_RUN]


async def test_a_run_begun_by_a_gateway_that_stopped_is_enqueued_by_another(env: Env) -> None:
    job = await env.jobs.create(every(minutes=1))
    stored = await env.store.get(job.id)
    assert stored is not None
    record = {
        "job": job.id,
        "title": "t",
        "by": "system",
        "queue": Q,
        "name": "tick",
        "args": 1,
        "created": START,
    }
    run_id = "01JX0000000000000000000000"
    await env.store.begin_run(job.id, START, kind="manual", run_id=run_id, record=record)
    # The gateway stopped here: the run has no task yet, and shows pending.
    assert (await env.jobs.run(job.id, run_id)).status is RunStatus.PENDING
    env.clock.advance(env.store.resume_ms - SECOND)
    assert (await env.step()).resumed == 0
    env.clock.advance(2 * SECOND)
    report = await env.step()
    assert report.resumed == 1
    assert (await env.tasks.record(Q, run_id) or {}).get("state") == TaskState.QUEUED
    assert (await env.store.get(job.id)).pending == ()  # type: ignore[union-attr]
    assert (await env.step()).resumed == 0


async def test_an_edit_takes_effect_at_once(env: Env) -> None:
    job = await env.jobs.create(every(minutes=60, overlap="allow"))
    assert await env.redis.zscore(JOBS_DUE, job.id) == START + 60 * MINUTE
    patch = JobPatch.model_validate(
        {
            "schedule": {
                "kind": "interval",
                "seconds": 2,
                "start_at": at(START + 2 * SECOND).isoformat(),
            }
        }
    )
    edited = await env.jobs.patch(job.id, patch)
    assert edited.next_run == at(START + 2 * SECOND)
    assert await env.redis.zscore(JOBS_DUE, job.id) == START + 2 * SECOND
    env.clock.advance(2 * SECOND)
    assert (await env.step()).fired == 1
    paused = await env.jobs.patch(job.id, JobPatch(active=False))
    assert paused.next_run is None
    assert await env.redis.zscore(JOBS_DUE, job.id) is None
    env.clock.advance(10 * SECOND)
    assert (await env.step()).fired == 0


async def test_a_stale_later_hint_is_lowered_to_the_truth(env: Env) -> None:
    job = await env.jobs.create(every(minutes=1))
    # A slow writer's late hint lands after the truth moved earlier: the next write fixes it.
    await env.redis.zadd(JOBS_DUE, {job.id: START + 99 * MINUTE})
    await env.store.hint(job.id, START + 99 * MINUTE)
    assert await env.redis.zscore(JOBS_DUE, job.id) == START + MINUTE


async def test_a_deleted_job_leaves_no_keys_and_does_not_fire(env: Env) -> None:
    job = await env.jobs.create(every(seconds=1, overlap="allow"))
    env.clock.advance(SECOND)
    await env.step()
    await env.jobs.delete(job.id)
    env.clock.advance(SECOND)
    assert (await env.step()).fired == 0
    left = {k for k in await env.redis.keys("*") if k.startswith(("jg:{job:", "jg:jobs"))}
    assert left == set()


async def test_a_success_with_a_warning_makes_a_warning_run(env: Env) -> None:
    job = await env.jobs.create(every(minutes=1).model_copy(update={"schedule": None}))
    run = await env.jobs.run_now(job.id, RunCreate(), "alice")
    claim = await env.tasks.claim(Q, 1, "seed", env.clock.now_ms())
    (lease,) = claim.leases
    finish = Finish(run.task_id, lease.token, AttemptOutcome.SUCCEEDED, text="7", warning="half")
    await env.tasks.finish(Q, finish, env.clock.now_ms())
    found = await env.jobs.run(job.id, run.id)
    assert (found.status, found.message) == (RunStatus.WARNING, "half")
    record = await env.tasks.record(Q, run.task_id)
    assert record is not None
    assert record["warn"] == "half"
    # a warning counts as a success for {{ last_successful_run }}
    assert await env.runs.last_success(job.id) == found.started_at


async def test_one_step_fires_every_due_job_and_a_broken_one_does_not_stop_the_others(
    env: Env,
) -> None:
    jobs = [await env.jobs.create(every(seconds=1, overlap="allow")) for _ in range(40)]
    await env.redis.hset(f"jg:{{job:{jobs[0].id}}}:job", "def", "not json")
    env.clock.advance(SECOND)
    report = await env.step()
    assert (report.fired, report.errors) == (39, 1)
    for job in jobs[1:]:
        assert (await env.jobs.get(job.id)).run_count == 1
