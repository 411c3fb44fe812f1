"""The gateway's jobs and runs routes as request specs, and the bodies they send.

The same kind of :class:`~sdk.api.Call` as :mod:`sdk.api`; the clients execute them through
:mod:`sdk.client_jobs`. A job's fields come as a model (:class:`~sdk.wire.JobCreate`), a plain
mapping in the wire's shape, or keywords on top of either; the keywords add the SDK's own
conveniences (:func:`job_fields`). Nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel

from sdk.api import Call, nothing, reads, segment
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
    TaskArgs,
    TaskCreate,
)

if TYPE_CHECKING:
    from sdk.answers import Params

M = TypeVar("M", bound=BaseModel)

Fields = Mapping[str, Any]


@runtime_checkable
class NamedTask(Protocol):
    """What a job needs of a task function (:class:`~sdk.tasks.TaskFunction`): where it runs,
    its name, and how it lays out and checks its arguments. A protocol, not the class, since
    :mod:`sdk.tasks` imports the clients."""

    queue: str
    name: str

    def create(
        self, args: Sequence[Any] = (), kwargs: Mapping[str, Any] | None = None
    ) -> TaskCreate: ...


def job_fields(given: Fields, names_task: bool = True) -> dict[str, Any]:
    """Wire fields from the SDK's keywords.

    - ``task`` may be a task function (``@task``): its queue and name (for a run, which names
      no task, ``names_task=False``, it only lays out the arguments);
    - ``args`` (a sequence) and ``kwargs`` (a mapping) are arguments of the task, laid out as
      the SDK's ``{"args": [...], "kwargs": {...}}`` payload (checked against the function's
      signature when ``task`` is one: ``TypeError``);
    - ``payload`` is the wire's ``args`` as is, any JSON, for workers of other conventions.
    """
    fields = dict(given)
    task = fields.get("task")
    if isinstance(task, NamedTask):
        fields["task"] = {"queue": task.queue, "name": task.name}
        if not names_task:
            del fields["task"]
    args = fields.pop("args", None)
    kwargs = fields.pop("kwargs", None)
    if "payload" in fields:
        if args is not None or kwargs is not None:
            raise TypeError("give either payload, or args and kwargs, not both")
        fields["args"] = fields.pop("payload")
    elif isinstance(task, NamedTask) and (args is not None or kwargs is not None):
        fields["args"] = task.create(args or (), kwargs).payload
    elif args is not None or kwargs is not None:
        if isinstance(args, str | bytes | Mapping):
            raise TypeError("args are the task's positional arguments: a list or tuple")
        laid_out = TaskArgs(args=list(args or ()), kwargs=dict(kwargs or {}))
        fields["args"] = laid_out.model_dump(mode="json", exclude_none=True)
    return fields


def model_of(model: type[M], base: M | Fields | None, given: Fields) -> M:
    """``model`` from ``base`` (a model or a wire-shaped mapping) with the keywords on top."""
    if isinstance(base, BaseModel):  # the fields set on it, nested models kept whole
        wire: dict[str, Any] = {name: getattr(base, name) for name in base.model_fields_set}
    else:
        wire = dict(base or {})
    if isinstance(wire.get("task"), NamedTask):
        wire["task"] = job_fields({"task": wire["task"]})["task"]
    return model.model_validate({**wire, **job_fields(given, "task" in model.model_fields)})


def _page(limit: int | None, cursor: str | None, **more: str | None) -> Params:
    given = {**more, "limit": limit, "cursor": cursor}
    return {name: value for name, value in given.items() if value is not None}


def _job(job_id: str) -> str:
    return f"/v1/jobs/{segment(job_id)}"


def _run(job_id: str, run_id: str) -> str:
    return f"{_job(job_id)}/runs/{segment(run_id)}"


# --- jobs ---------------------------------------------------------------------------------------


def create_job(job: JobCreate) -> Call[Job]:
    return Call("POST", "/v1/jobs", reads(Job), body=job)


def list_jobs(limit: int | None = None, cursor: str | None = None) -> Call[JobPage]:
    """``GET /v1/jobs``: one page of jobs, oldest first."""
    return Call("GET", "/v1/jobs", reads(JobPage), params=_page(limit, cursor))


def get_job(job_id: str) -> Call[Job]:
    return Call("GET", _job(job_id), reads(Job))


def replace_job(job_id: str, job: JobCreate) -> Call[Job]:
    return Call("PUT", _job(job_id), reads(Job), body=job)


def update_job(job_id: str, patch: JobPatch) -> Call[Job]:
    """``PATCH``: the fields set on ``patch`` replace the job's; those set to None are sent as
    null (clearing ``schedule``, ``notify`` or ``args``)."""
    return Call("PATCH", _job(job_id), reads(Job), body=patch, nulls=True)


def delete_job(job_id: str) -> Call[None]:
    return Call("DELETE", _job(job_id), nothing)


def clone_job(job_id: str) -> Call[Job]:
    return Call("POST", f"{_job(job_id)}/clone", reads(Job))


def preview_job(job_id: str, count: int = 10) -> Call[FireTimes]:
    """``GET /v1/jobs/{id}/preview``: the next ``count`` (1 to 100) fire times."""
    return Call("GET", f"{_job(job_id)}/preview", reads(FireTimes), params={"count": count})


# --- runs ---------------------------------------------------------------------------------------


def run_job(job_id: str, run: RunCreate) -> Call[Run]:
    """``POST /v1/jobs/{id}/runs``: run now; ``args`` set (even to None) replaces the job's."""
    return Call("POST", f"{_job(job_id)}/runs", reads(Run), body=run, nulls=True)


def list_runs(
    job_id: str,
    status: RunStatus | str | None = None,
    limit: int | None = None,
    cursor: str | None = None,
) -> Call[RunPage]:
    """``GET /v1/jobs/{id}/runs``: one page of runs, newest first; with ``status`` a page may
    be short and still have a next cursor."""
    chosen = None if status is None else RunStatus(status).value
    params = _page(limit, cursor, status=chosen)
    return Call("GET", f"{_job(job_id)}/runs", reads(RunPage), params=params)


def get_run(job_id: str, run_id: str) -> Call[Run]:
    return Call("GET", _run(job_id, run_id), reads(Run))


def stop_run(job_id: str, run_id: str) -> Call[Run]:
    return Call("POST", f"{_run(job_id, run_id)}/stop", reads(Run))


def restart_run(job_id: str, run_id: str) -> Call[Run]:
    return Call("POST", f"{_run(job_id, run_id)}/restart", reads(Run))


def delete_run(job_id: str, run_id: str) -> Call[None]:
    return Call("DELETE", _run(job_id, run_id), nothing)


def run_logs(job_id: str, run_id: str) -> Call[LogPage]:
    """The log lines of the run's task (its first 1000; ``GET /v1/tasks/{id}/logs`` pages)."""
    return Call("GET", f"{_run(job_id, run_id)}/logs", reads(LogPage))
