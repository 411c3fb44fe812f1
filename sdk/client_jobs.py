"""The jobs methods of :class:`~sdk.client.Client` and :class:`~sdk.client.AsyncClient`.

Jobs (define, list, change, pause with ``update_job(id, active=False)``, clone, preview), their
runs (run now, list, stop, restart, delete, logs) and the task catalog a job's task is chosen
from: the calls of :mod:`sdk.api_jobs`, as two mixins the clients inherit. A mixin only builds
the call; the client's own ``_send`` executes it.

::

    job = client.create_job(
        title="Thumbnails", task=resize_image, kwargs={"size": 256},
        schedule=Crontab(hour="3", timezone="Europe/Berlin"),
    )
    run = client.run_job(job.id, kwargs={"size": 64}, note="one more")
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from sdk import lazy

if TYPE_CHECKING:
    from sdk import api, api_jobs, wire
    from sdk.api import Call
    from sdk.api_jobs import Fields
    from sdk.wire import (
        CatalogPage,
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
    )
else:  # loaded on first use, so that `from sdk import Client` stays light (sdk/lazy.py)
    api = lazy.module("sdk.api")
    api_jobs = lazy.module("sdk.api_jobs")
    wire = lazy.module("sdk.wire")

__all__ = ["AsyncJobMethods", "JobMethods"]

T = TypeVar("T")


class JobMethods:
    """Jobs and runs with a blocking :class:`~sdk.client.Client`.

    Where a job is given, it is a :class:`~sdk.wire.JobCreate`, a mapping in the wire's shape
    (``docs/jobs.md``), or keywords on top of either: its fields, where ``task`` may be a task
    function, ``args``/``kwargs`` are the task's arguments (the SDK's payload layout) and
    ``payload`` is the wire's ``args`` as is. Refusals raise :class:`~sdk.errors.ApiError`
    (``404`` unknown job, run or queue; ``422`` naming the field); fields the SDK can check
    itself raise pydantic's ``ValidationError`` before anything is sent.
    """

    def _send(self, call: Call[T]) -> T:
        raise NotImplementedError

    def create_job(self, job: JobCreate | Fields | None = None, /, **fields: Any) -> Job:
        """Define a job, e.g. ``create_job(title=..., task=fn, kwargs={...}, schedule=...)``."""
        return self._send(api_jobs.create_job(api_jobs.model_of(wire.JobCreate, job, fields)))

    def list_jobs(self, limit: int | None = None, cursor: str | None = None) -> JobPage:
        """One page of jobs, oldest first (50 unless ``limit``, at most 500); pass the page's
        ``next_cursor`` as ``cursor`` for the next one."""
        return self._send(api_jobs.list_jobs(limit, cursor))

    def get_job(self, job_id: str) -> Job:
        return self._send(api_jobs.get_job(job_id))

    def replace_job(
        self, job_id: str, job: JobCreate | Fields | None = None, /, **fields: Any
    ) -> Job:
        """Replace a job's whole definition; fields not given take their defaults."""
        body = api_jobs.model_of(wire.JobCreate, job, fields)
        return self._send(api_jobs.replace_job(job_id, body))

    def update_job(
        self, job_id: str, patch: JobPatch | Fields | None = None, /, **fields: Any
    ) -> Job:
        """Change only the fields given, e.g. ``update_job(id, active=False)`` (pause);
        ``schedule=None`` leaves only manual runs, ``notify=None`` drops the URL."""
        body = api_jobs.model_of(wire.JobPatch, patch, fields)
        return self._send(api_jobs.update_job(job_id, body))

    def delete_job(self, job_id: str) -> None:
        """Delete a job and its run records; its runs' tasks stay in their queue."""
        self._send(api_jobs.delete_job(job_id))

    def clone_job(self, job_id: str) -> Job:
        """A copy of the job, inactive, titled "... (copy)"."""
        return self._send(api_jobs.clone_job(job_id))

    def preview_job(self, job_id: str, count: int = 10) -> FireTimes:
        """The job's next ``count`` fire times (none for a manual or inactive job)."""
        return self._send(api_jobs.preview_job(job_id, count))

    def run_job(self, job_id: str, run: RunCreate | Fields | None = None, /, **fields: Any) -> Run:
        """Run the job now, whatever its schedule says. Optional: ``args``/``kwargs`` (or
        ``payload``) replace its default args (``task=fn`` checks them against ``fn``),
        ``queue`` (another registered one), ``start_at`` (an aware datetime), ``title``,
        ``note``."""
        body = api_jobs.model_of(wire.RunCreate, run, fields)
        return self._send(api_jobs.run_job(job_id, body))

    def list_runs(
        self,
        job_id: str,
        status: RunStatus | str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> RunPage:
        """One page of the job's runs, newest first, of one ``status`` if given."""
        return self._send(api_jobs.list_runs(job_id, status, limit, cursor))

    def get_run(self, job_id: str, run_id: str) -> Run:
        return self._send(api_jobs.get_run(job_id, run_id))

    def stop_run(self, job_id: str, run_id: str) -> Run:
        """Stop a run: a pending one at once, a running one at its next heartbeat."""
        return self._send(api_jobs.stop_run(job_id, run_id))

    def restart_run(self, job_id: str, run_id: str) -> Run:
        """A new run with the same args and queue; the old one is kept."""
        return self._send(api_jobs.restart_run(job_id, run_id))

    def delete_run(self, job_id: str, run_id: str) -> None:
        """Delete a finished run's record (``409`` while it is pending or running)."""
        self._send(api_jobs.delete_run(job_id, run_id))

    def run_logs(self, job_id: str, run_id: str) -> LogPage:
        return self._send(api_jobs.run_logs(job_id, run_id))

    def list_catalog(
        self,
        queue: str | None = None,
        name: str | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> CatalogPage:
        """One page of the task catalog: the tasks endpoints serve, with their payload schema
        (``task_catalog`` reads every page)."""
        return self._send(api.catalog_page(queue, name, cursor, limit))


class AsyncJobMethods:
    """The asyncio twin of :class:`JobMethods`, for :class:`~sdk.client.AsyncClient`."""

    async def _send(self, call: Call[T]) -> T:
        raise NotImplementedError

    async def create_job(self, job: JobCreate | Fields | None = None, /, **fields: Any) -> Job:
        return await self._send(api_jobs.create_job(api_jobs.model_of(wire.JobCreate, job, fields)))

    async def list_jobs(self, limit: int | None = None, cursor: str | None = None) -> JobPage:
        return await self._send(api_jobs.list_jobs(limit, cursor))

    async def get_job(self, job_id: str) -> Job:
        return await self._send(api_jobs.get_job(job_id))

    async def replace_job(
        self, job_id: str, job: JobCreate | Fields | None = None, /, **fields: Any
    ) -> Job:
        body = api_jobs.model_of(wire.JobCreate, job, fields)
        return await self._send(api_jobs.replace_job(job_id, body))

    async def update_job(
        self, job_id: str, patch: JobPatch | Fields | None = None, /, **fields: Any
    ) -> Job:
        body = api_jobs.model_of(wire.JobPatch, patch, fields)
        return await self._send(api_jobs.update_job(job_id, body))

    async def delete_job(self, job_id: str) -> None:
        await self._send(api_jobs.delete_job(job_id))

    async def clone_job(self, job_id: str) -> Job:
        return await self._send(api_jobs.clone_job(job_id))

    async def preview_job(self, job_id: str, count: int = 10) -> FireTimes:
        return await self._send(api_jobs.preview_job(job_id, count))

    async def run_job(
        self, job_id: str, run: RunCreate | Fields | None = None, /, **fields: Any
    ) -> Run:
        body = api_jobs.model_of(wire.RunCreate, run, fields)
        return await self._send(api_jobs.run_job(job_id, body))

    async def list_runs(
        self,
        job_id: str,
        status: RunStatus | str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> RunPage:
        return await self._send(api_jobs.list_runs(job_id, status, limit, cursor))

    async def get_run(self, job_id: str, run_id: str) -> Run:
        return await self._send(api_jobs.get_run(job_id, run_id))

    async def stop_run(self, job_id: str, run_id: str) -> Run:
        return await self._send(api_jobs.stop_run(job_id, run_id))

    async def restart_run(self, job_id: str, run_id: str) -> Run:
        return await self._send(api_jobs.restart_run(job_id, run_id))

    async def delete_run(self, job_id: str, run_id: str) -> None:
        await self._send(api_jobs.delete_run(job_id, run_id))

    async def run_logs(self, job_id: str, run_id: str) -> LogPage:
        return await self._send(api_jobs.run_logs(job_id, run_id))

    async def list_catalog(
        self,
        queue: str | None = None,
        name: str | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> CatalogPage:
        return await self._send(api.catalog_page(queue, name, cursor, limit))
