"""The jobs and runs methods of both clients against a real gateway and its Redis.

The gateway runs in this process over loopback, and so does an SDK :class:`~sdk.Worker`
serving the task functions of :mod:`tests.sdk.jobs_gateway`, registered with their catalog:
runs really run, log and succeed. Every test runs once with the blocking :class:`~sdk.Client`
(its calls in a thread, so the gateway in this event loop keeps serving) and once with
:class:`~sdk.AsyncClient`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from pydantic import ValidationError

from sdk import (
    ApiError,
    AsyncClient,
    Client,
    Crontab,
    Interval,
    JobCreate,
    OverlapPolicy,
    RunStatus,
)
from sdk.schedules import schedule_text
from sdk.wire import Job, Run
from tests.sdk.jobs_gateway import ADMIN, HELD, READER, Q, jobs_gateway, report, resize
from tests.support import until

MISSING = "01J00000000000000000000000"
BERLIN = ZoneInfo("Europe/Berlin")


class Jobs:
    """One client's methods, awaited alike: the blocking client's in a thread."""

    def __init__(self, client: Client | AsyncClient) -> None:
        self.client = client

    async def __call__(self, method: str, *args: Any, **kwargs: Any) -> Any:
        bound = getattr(self.client, method)
        if isinstance(self.client, Client):
            return await asyncio.to_thread(bound, *args, **kwargs)
        return await bound(*args, **kwargs)

    async def refused(self, status: int, method: str, *args: Any, **kwargs: Any) -> ApiError:
        with pytest.raises(ApiError) as caught:
            await self(method, *args, **kwargs)
        assert caught.value.status == status, caught.value
        return caught.value

    async def run_ended(self, run: Run) -> Run:
        async def ended() -> Run | None:
            found: Run = await self("get_run", run.job_id, run.id)
            return found if found.status.finished else None

        return await until(ended, timeout=20, what=f"run {run.id} to end")


@pytest.fixture
async def gateway(redis_url: str) -> AsyncIterator[str]:
    async with jobs_gateway(redis_url) as url:
        yield url


@pytest.fixture(params=["sync", "async"])
async def jobs(request: pytest.FixtureRequest, gateway: str) -> AsyncIterator[Jobs]:
    if request.param == "sync":
        with Client(gateway, ADMIN) as client:
            yield Jobs(client)
    else:
        async with AsyncClient(gateway, ADMIN) as aclient:
            yield Jobs(aclient)


async def nightly(jobs: Jobs, **fields: Any) -> Job:
    job: Job = await jobs(
        "create_job",
        title="Thumbnails",
        task=resize,
        kwargs={"size": 256},
        schedule=Crontab(hour="3", minute="0", timezone="Europe/Berlin"),
        **fields,
    )
    return job


# --- jobs ---------------------------------------------------------------------------------------


async def test_a_job_from_a_task_function_model_or_mapping(jobs: Jobs) -> None:
    job = await nightly(jobs, overlap="allow")
    assert (job.task.queue, job.task.name) == (Q, resize.name)
    assert job.args == {"args": [], "kwargs": {"size": 256}}
    assert job.overlap is OverlapPolicy.ALLOW
    assert job.served is True
    assert job.next_run is not None
    assert (job.next_run.astimezone(BERLIN).hour, job.next_run.minute) == (3, 0)
    assert await jobs("get_job", job.id) == job
    assert (await jobs("get_job", job.id.lower())).id == job.id

    model = JobCreate(
        title="Weekly", task={"queue": Q, "name": report.name}, args={"kwargs": {"days": 7}}
    )
    from_model: Job = await jobs("create_job", model, description="from a model")
    assert (from_model.args, from_model.description) == ({"kwargs": {"days": 7}}, "from a model")
    assert from_model.schedule is None
    hourly = JobCreate(title="Hourly", task={"queue": Q, "name": "x"}, schedule=Crontab(minute="5"))
    patched: Job = await jobs("create_job", hourly, active=False)
    assert (patched.title, patched.active) == ("Hourly", False)
    assert patched.schedule is not None
    assert patched.schedule.model_dump() == Crontab(minute="5").model_dump()
    wire = {"title": "Raw", "task": {"queue": Q, "name": "other"}, "args": [1, 2]}
    from_mapping: Job = await jobs("create_job", wire, active=False)
    assert (from_mapping.args, from_mapping.active, from_mapping.served) == ([1, 2], False, False)

    first = await jobs("list_jobs", limit=2)
    assert [j.id for j in first.items] == [job.id, from_model.id]
    rest = await jobs("list_jobs", cursor=first.next_cursor)
    assert [j.id for j in rest.items] == [patched.id, from_mapping.id]
    assert rest.next_cursor is None


async def test_pause_resume_patch_replace_preview_clone_delete(jobs: Jobs) -> None:
    job = await nightly(jobs)
    paused: Job = await jobs("update_job", job.id, active=False)
    assert (paused.active, paused.next_run, paused.title) == (False, None, job.title)
    assert (await jobs("preview_job", job.id)).items == []
    resumed: Job = await jobs("update_job", job.id, {"active": True})
    assert resumed.next_run == job.next_run

    preview = await jobs("preview_job", job.id, count=3)
    assert preview.timezone == "Europe/Berlin"
    assert [t.astimezone(BERLIN).hour for t in preview.items] == [3, 3, 3]
    assert preview.items[0] == job.next_run

    hooked: Job = await jobs("update_job", job.id, notify="https://example.com/hook")
    assert hooked.notify == "https://example.com/hook"
    manual: Job = await jobs("update_job", job.id, schedule=None, notify=None, args=[8])
    assert (manual.schedule, manual.next_run, manual.notify) == (None, None, None)
    assert manual.args == {"args": [8], "kwargs": {}}
    assert manual.title == job.title  # only the fields given changed

    start = datetime.now(UTC) + timedelta(hours=1)
    replaced: Job = await jobs(
        "replace_job",
        job.id,
        title="Every six hours",
        task=resize,
        args=[64],
        schedule=Interval(hours=6, start_at=start),
    )
    assert replaced.args == {"args": [64], "kwargs": {}}
    assert replaced.description == ""  # replaced whole: back to its default
    preview = await jobs("preview_job", job.id, count=3)
    assert preview.timezone is None
    assert [t - preview.items[0] for t in preview.items] == [timedelta(hours=h) for h in (0, 6, 12)]

    clone: Job = await jobs("clone_job", job.id)
    assert (clone.title, clone.active) == ("Every six hours (copy)", False)
    assert clone.id != job.id
    assert await jobs("delete_job", job.id) is None
    await jobs.refused(404, "get_job", job.id)
    assert [j.id for j in (await jobs("list_jobs")).items] == [clone.id]


# --- runs ---------------------------------------------------------------------------------------


async def test_run_now_runs_logs_and_succeeds(jobs: Jobs) -> None:
    job = await nightly(jobs)
    run: Run = await jobs(
        "run_job", job.id, task=resize, args=[64], kwargs={"path": "b.png"}, title="Small", note="n"
    )
    assert run.args == {"args": [64], "kwargs": {"path": "b.png"}}
    assert (run.title, run.note, run.started_by, run.queue) == ("Small", "n", "alice", Q)
    ended = await jobs.run_ended(run)
    assert ended.status is RunStatus.SUCCESS
    logs = await jobs("run_logs", job.id, run.id)
    assert [line.message for line in logs.items] == ["resized b.png to 64"]

    defaults: Run = await jobs("run_job", job.id)
    assert defaults.args == job.args
    assert (await jobs.run_ended(defaults)).status is RunStatus.SUCCESS
    page = await jobs("list_runs", job.id, status="success", limit=1)
    assert [r.id for r in page.items] == [defaults.id]  # newest first
    rest = await jobs("list_runs", job.id, status=RunStatus.SUCCESS, cursor=page.next_cursor)
    assert [r.id for r in rest.items] == [run.id]
    assert (await jobs("get_job", job.id)).run_count == 2

    assert await jobs("delete_run", job.id, run.id) is None
    await jobs.refused(404, "get_run", job.id, run.id)


async def test_stop_restart_and_delete_a_pending_run(jobs: Jobs) -> None:
    job = await nightly(jobs)
    later = datetime.now(UTC) + timedelta(hours=1)
    pending: Run = await jobs("run_job", job.id, {"queue": HELD}, start_at=later)
    assert (pending.status, pending.queue) == (RunStatus.PENDING, HELD)
    assert pending.args == job.args  # the job's default args
    await jobs.refused(409, "delete_run", job.id, pending.id)

    stopped: Run = await jobs("stop_run", job.id, pending.id)
    assert stopped.status is RunStatus.STOPPED
    await jobs.refused(409, "stop_run", job.id, pending.id)

    again: Run = await jobs("restart_run", job.id, pending.id)
    assert again.id != pending.id
    assert (again.queue, again.args, again.status) == (HELD, job.args, RunStatus.PENDING)
    stopped_only = await jobs("list_runs", job.id, RunStatus.STOPPED)
    assert [r.id for r in stopped_only.items] == [pending.id]
    await jobs("delete_run", job.id, pending.id)
    assert [r.id for r in (await jobs("list_runs", job.id)).items] == [again.id]


# --- the catalog --------------------------------------------------------------------------------


async def test_list_catalog_pages_through_the_served_tasks(jobs: Jobs) -> None:
    first = await jobs("list_catalog", queue=Q, limit=1)
    rest = await jobs("list_catalog", queue=Q, limit=1, cursor=first.next_cursor)
    entries = [*first.items, *rest.items]
    assert sorted(e.name for e in entries) == sorted([resize.name, report.name])
    assert all(e.served and e.queue == Q for e in entries)
    (resized,) = [e for e in entries if e.name == resize.name]
    assert set(resized.payload_schema["properties"]) == {"args", "kwargs"}
    assert (await jobs("list_catalog", name=report.name)).items[0].name == report.name
    assert (await jobs("list_catalog", queue=HELD)).items == []


# --- errors -------------------------------------------------------------------------------------


async def test_unknown_jobs_runs_and_queues_are_404(jobs: Jobs) -> None:
    job = await nightly(jobs)
    for method, args in [
        ("get_job", (MISSING,)),
        ("update_job", (MISSING,)),
        ("delete_job", (MISSING,)),
        ("clone_job", (MISSING,)),
        ("preview_job", (MISSING,)),
        ("run_job", (MISSING,)),
        ("list_runs", (MISSING,)),
        ("get_run", (job.id, MISSING)),
        ("stop_run", (job.id, MISSING)),
        ("restart_run", (job.id, MISSING)),
        ("delete_run", (job.id, MISSING)),
        ("run_logs", (job.id, MISSING)),
    ]:
        await jobs.refused(404, method, *args)
    await jobs.refused(404, "replace_job", MISSING, title="x", task=resize)
    unregistered = await jobs.refused(
        404, "create_job", title="x", task={"queue": "nope", "name": "t"}
    )
    assert "'nope' is not registered" in str(unregistered)
    await jobs.refused(404, "run_job", job.id, queue="nope")


def fields(error: ApiError) -> list[str]:
    return [e.field for e in error.problem.errors or ()]


async def test_the_gateway_refusals_name_the_field(jobs: Jobs) -> None:
    job = await nightly(jobs)
    bad_args = await jobs.refused(422, "run_job", job.id, kwargs={"size": "big"})
    assert any(f.startswith("args.kwargs.size") for f in fields(bad_args)), bad_args
    bad_patch = await jobs.refused(422, "update_job", job.id, payload={"kwargs": {"size": []}})
    assert any(f.startswith("args.kwargs.size") for f in fields(bad_patch)), bad_patch
    assert (await jobs("get_job", job.id)).args == job.args  # nothing changed


async def test_inputs_the_sdk_can_check_are_refused_before_sending(jobs: Jobs) -> None:
    with pytest.raises(ValidationError, match="title"):
        await jobs("create_job", title="", task=resize)
    with pytest.raises(ValidationError, match="minute"):  # the schema's pattern: 0-59 only
        Crontab(minute="61")
    with pytest.raises(ValidationError, match="overlap"):
        await jobs("create_job", title="x", task=resize, overlap="sometimes")
    with pytest.raises(TypeError):  # resize takes no `colour`
        await jobs("create_job", title="x", task=resize, kwargs={"size": 1, "colour": "red"})
    with pytest.raises(TypeError, match="not both"):
        await jobs("create_job", title="x", task=resize, args=[1], payload={})
    with pytest.raises(TypeError, match="a list or tuple"):
        await jobs("create_job", title="x", task={"queue": Q, "name": "t"}, args={"a": 1})
    assert (await jobs("list_jobs")).items == []


async def test_a_read_only_key_reads_but_cannot_change(gateway: str, jobs: Jobs) -> None:
    job = await nightly(jobs)
    async with AsyncClient(gateway, READER) as reader:
        assert (await reader.get_job(job.id)).id == job.id
        assert (await reader.list_runs(job.id)).items == []
        with pytest.raises(ApiError) as caught:
            await reader.run_job(job.id)
    assert caught.value.status == 403


# --- schedules ---------------------------------------------------------------------------------


def test_schedules_read_as_crontab_lines() -> None:
    assert schedule_text(None) == "manual"
    assert schedule_text(Crontab(minute="*/15", day_of_week="1-5")) == "cron */15 * * * 1-5 (UTC)"
    assert schedule_text(Interval(hours=6)) == "every 6 h"
    start = datetime(2030, 1, 1, tzinfo=UTC) + timedelta(minutes=1)
    assert schedule_text(Interval(hours=1, minutes=30, start_at=start)) == "every 1 h 30 min"
