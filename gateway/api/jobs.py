"""Routes for jobs and their runs (admin scope to change, read to list)."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field

from gateway.api.routing import Call, Link, Operation, Param
from gateway.core.errors import UnknownTaskName
from gateway.security.auth import Access
from gateway.services.jobs import JobService
from gateway.services.tasks import OffsetCursor
from sdk.wire import (
    FireTimes,
    Job,
    JobCreate,
    JobPage,
    JobPatch,
    LogPage,
    Run,
    RunCreate,
    RunPage,
    RunStatus,
    TaskId,
)


def _jobs(call: Call) -> JobService:
    jobs: JobService = call.services.jobs
    return jobs


def _job_id(call: Call) -> str:
    return str(JOB_ID.parse(call.path("job_id")))


def _run_id(call: Call) -> str:
    return str(RUN_ID.parse(call.path("run_id")))


def _started_by(call: Call) -> str:
    return call.principal.name if call.principal else "unknown"


async def create_job(call: Call) -> BaseModel:
    return await _jobs(call).create(call.body)


async def list_jobs(call: Call) -> BaseModel:
    return await _jobs(call).page(call.param(CURSOR), call.param(LIMIT))


async def get_job(call: Call) -> BaseModel:
    return await _jobs(call).get(_job_id(call))


async def replace_job(call: Call) -> BaseModel:
    return await _jobs(call).replace(_job_id(call), call.body)


async def patch_job(call: Call) -> BaseModel:
    return await _jobs(call).patch(_job_id(call), call.body)


async def delete_job(call: Call) -> None:
    await _jobs(call).delete(_job_id(call))


async def clone_job(call: Call) -> BaseModel:
    return await _jobs(call).clone(_job_id(call))


async def preview_job(call: Call) -> BaseModel:
    return await _jobs(call).preview(_job_id(call), call.param(COUNT))


async def list_runs(call: Call) -> BaseModel:
    return await _jobs(call).runs_page(
        _job_id(call), call.param(STATUS), call.param(CURSOR), call.param(LIMIT)
    )


async def run_job(call: Call) -> BaseModel:
    return await _jobs(call).run_now(_job_id(call), call.body, _started_by(call))


async def get_run(call: Call) -> BaseModel:
    return await _jobs(call).run(_job_id(call), _run_id(call))


async def stop_run(call: Call) -> BaseModel:
    return await _jobs(call).stop(_job_id(call), _run_id(call))


async def restart_run(call: Call) -> BaseModel:
    return await _jobs(call).restart(_job_id(call), _run_id(call), _started_by(call))


async def delete_run(call: Call) -> None:
    await _jobs(call).delete_run(_job_id(call), _run_id(call))


async def run_logs(call: Call) -> BaseModel:
    return await _jobs(call).logs(_job_id(call), _run_id(call))


JOB_ID = Param("job_id", "path", "Job id (a ULID, any case).", TaskId, True)
RUN_ID = Param("run_id", "path", "Run id (a ULID, any case): also its task's id.", TaskId, True)
LIMIT = Param("limit", "query", "Page size.", Annotated[int, Field(ge=1, le=500)], default=50)
CURSOR = Param("cursor", "query", "The next_cursor of the previous page.", OffsetCursor)
COUNT = Param(
    "count", "query", "How many fire times.", Annotated[int, Field(ge=1, le=100)], default=10
)
STATUS = Param("status", "query", "Only runs with this status.", RunStatus)

JOB = (JOB_ID,)
RUN = (JOB_ID, RUN_ID)
JOB_LINKS = tuple(
    Link(name, target, {"job_id": "$response.body#/id"})
    for name, target in (
        ("GetJob", "get_job"),
        ("PreviewJob", "preview_job"),
        ("ListRuns", "list_runs"),
        ("RunJob", "run_job"),
    )
)
RUN_LINKS = tuple(
    Link(name, target, {"job_id": "$response.body#/job_id", "run_id": "$response.body#/id"})
    for name, target in (
        ("GetRun", "get_run"),
        ("StopRun", "stop_run"),
        ("RunLogs", "run_logs"),
    )
)

OPERATIONS = [
    Operation(
        "POST",
        "/v1/jobs",
        "Define a job",
        "jobs",
        Access.ADMIN,
        create_job,
        body=JobCreate,
        response=Job,
        status=201,
        errors=(404,),
        problems=(UnknownTaskName,),
        description="The task's queue must be registered (404 otherwise); a crontab's fields "
        "must parse. The next fire time is computed at once (next_run).",
        links=JOB_LINKS,
    ),
    Operation(
        "GET",
        "/v1/jobs",
        "List jobs, oldest first, with their last and next run",
        "jobs",
        Access.READ,
        list_jobs,
        response=JobPage,
        params=(LIMIT, CURSOR),
    ),
    Operation(
        "GET",
        "/v1/jobs/{job_id}",
        "Get a job",
        "jobs",
        Access.READ,
        get_job,
        response=Job,
        params=JOB,
        errors=(404,),
    ),
    Operation(
        "PUT",
        "/v1/jobs/{job_id}",
        "Replace a job's definition",
        "jobs",
        Access.ADMIN,
        replace_job,
        body=JobCreate,
        response=Job,
        params=JOB,
        errors=(404,),
        problems=(UnknownTaskName,),
        description="The next fire time is computed again now (kept when the schedule and the "
        "active flag did not change), on every gateway at once.",
    ),
    Operation(
        "PATCH",
        "/v1/jobs/{job_id}",
        "Change some fields of a job",
        "jobs",
        Access.ADMIN,
        patch_job,
        body=JobPatch,
        response=Job,
        params=JOB,
        errors=(404,),
        problems=(UnknownTaskName,),
        description="The fields given replace the job's; schedule and notify may be null.",
    ),
    Operation(
        "DELETE",
        "/v1/jobs/{job_id}",
        "Delete a job and its run records",
        "jobs",
        Access.ADMIN,
        delete_job,
        status=204,
        params=JOB,
        errors=(404,),
        description="Tasks of its runs stay in their queues (until swept); running ones go on.",
    ),
    Operation(
        "POST",
        "/v1/jobs/{job_id}/clone",
        "Copy a job (the copy is inactive)",
        "jobs",
        Access.ADMIN,
        clone_job,
        response=Job,
        status=201,
        params=JOB,
        errors=(404,),
        problems=(UnknownTaskName,),
        links=JOB_LINKS,
    ),
    Operation(
        "GET",
        "/v1/jobs/{job_id}/preview",
        "The job's next fire times",
        "jobs",
        Access.READ,
        preview_job,
        response=FireTimes,
        params=(JOB_ID, COUNT),
        errors=(404,),
        description="Empty for a job without a schedule or inactive. DST: docs/jobs.md.",
    ),
    Operation(
        "GET",
        "/v1/jobs/{job_id}/runs",
        "List a job's runs, newest first",
        "runs",
        Access.READ,
        list_runs,
        response=RunPage,
        params=(JOB_ID, STATUS, LIMIT, CURSOR),
        errors=(404,),
        description="With status, up to 10,000 runs are read per call: a page may be short "
        "and still have a next_cursor.",
    ),
    Operation(
        "POST",
        "/v1/jobs/{job_id}/runs",
        "Run a job now",
        "runs",
        Access.ADMIN,
        run_job,
        body=RunCreate,
        response=Run,
        status=201,
        params=JOB,
        errors=(404,),
        problems=(UnknownTaskName,),
        description="Makes a run whatever the schedule, active flag and overlap policy say "
        "(404 when the job or the run's queue does not exist). "
        "args replaces the job's default args (which are templated; given args are not).",
        links=RUN_LINKS,
    ),
    Operation(
        "GET",
        "/v1/jobs/{job_id}/runs/{run_id}",
        "Get a run",
        "runs",
        Access.READ,
        get_run,
        response=Run,
        params=RUN,
        errors=(404,),
    ),
    Operation(
        "DELETE",
        "/v1/jobs/{job_id}/runs/{run_id}",
        "Delete a finished run's record",
        "runs",
        Access.ADMIN,
        delete_run,
        status=204,
        params=RUN,
        errors=(404, 409),
        description="409 while it is pending or running: stop it first.",
    ),
    Operation(
        "POST",
        "/v1/jobs/{job_id}/runs/{run_id}/stop",
        "Stop a run",
        "runs",
        Access.ADMIN,
        stop_run,
        response=Run,
        params=RUN,
        errors=(404, 409),
        description="A pending run ends at once; a running one is asked to stop (its next "
        "heartbeat answer says so) and ends as stopped. 409 when it has ended.",
    ),
    Operation(
        "POST",
        "/v1/jobs/{job_id}/runs/{run_id}/restart",
        "Run again with the same args and queue",
        "runs",
        Access.ADMIN,
        restart_run,
        response=Run,
        status=201,
        params=RUN,
        errors=(404,),
        problems=(UnknownTaskName,),
        description="A new run; the old one is kept.",
        links=RUN_LINKS,
    ),
    Operation(
        "GET",
        "/v1/jobs/{job_id}/runs/{run_id}/logs",
        "Read a run's log lines",
        "runs",
        Access.READ,
        run_logs,
        response=LogPage,
        params=RUN,
        errors=(404,),
    ),
]
