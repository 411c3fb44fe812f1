"""Jobs: the list (last run, next run), a job with its next fire times and its runs, and the
form to create or edit one, its args fields built from the task catalog's schema; pause,
resume, run now, clone and delete. A job's runs are ``gateway.admin.pages.runs``'s."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from gateway.admin import jobform
from gateway.admin.argsform import Shape, fields_of, form_for, read_args
from gateway.admin.web import PREFIX, Admin, Visit, checked
from gateway.core.errors import ValidationFailed
from gateway.services.jobs import JobService
from sdk.wire import CatalogEntry, Job, JobPatch, RunCreate, RunStatus, TaskId
from sdk.wire.timezones import timezones

PAGE_SIZE = 50
RUNS_PAGE_SIZE = 25
PREVIEW = 5
CATALOG_SHOWN = 500
RUN_STATUSES = tuple(RunStatus)


def job_id_of(visit: Visit) -> str:
    return str(checked(TaskId, "job id", visit.path("job_id").upper()))


async def catalog(visit: Visit) -> list[CatalogEntry]:
    return (await visit.services.catalog.page(None, None, None, CATALOG_SHOWN)).items


def schema_of(entries: list[CatalogEntry], key: str) -> Mapping[str, Any] | None:
    """The payload schema the catalog holds for ``queue/name``, if any."""
    queue, name = jobform.split_task(key)
    for entry in entries:
        if (entry.queue, entry.name) == (queue, name):
            return entry.payload_schema
    return None


def _jobs(visit: Visit) -> JobService:
    return visit.services.jobs


# --- the list ---------------------------------------------------------------------------------


async def jobs(visit: Visit) -> Response:
    cursor = visit.query("cursor")
    page = await _jobs(visit).page(cursor, PAGE_SIZE)
    next_url = f"{PREFIX}/jobs?cursor={page.next_cursor}" if page.next_cursor else None
    return visit.render(
        "jobs.html",
        "_jobs.html",
        active="jobs",
        page=page,
        paged=cursor is not None,
        first_url=f"{PREFIX}/jobs",
        next_url=next_url,
        self_url=visit.here,
    )


# --- one job ----------------------------------------------------------------------------------


async def job(visit: Visit) -> Response:
    job_id = job_id_of(visit)
    found = await _jobs(visit).get(job_id)
    status = visit.query("status")
    chosen = RunStatus(checked(RunStatus, "status", status)) if status else None
    cursor = visit.query("cursor")
    runs = await _jobs(visit).runs_page(job_id, chosen, cursor, RUNS_PAGE_SIZE)
    query = {"status": chosen.value} if chosen else {}
    here = f"{PREFIX}/jobs/{job_id}"
    next_url = None
    if runs.next_cursor is not None:
        next_url = f"{here}?{urlencode({**query, 'cursor': runs.next_cursor})}"
    return visit.render(
        "job.html",
        "_job.html",
        active="jobs",
        job=found,
        preview=await _jobs(visit).preview(job_id, PREVIEW),
        runs=runs,
        run_status=chosen,
        statuses=RUN_STATUSES,
        paged=cursor is not None,
        first_url=f"{here}?{urlencode(query)}",
        next_url=next_url,
        self_url=visit.here,
    )


# --- the form ---------------------------------------------------------------------------------


async def _form_page(
    visit: Visit, form: jobform.JobForm, job: Job | None, status: int = 200
) -> Response:
    entries = await catalog(visit)
    keys = [jobform.task_key(e.queue, e.name) for e in entries]
    return visit.render(
        "job_form.html",
        status=status,
        active="jobs",
        form=form,
        args=form.args,
        task=form.task,
        job=job,
        catalog=entries,
        known=form.task in keys,
        schedule_kinds=jobform.SCHEDULE_KINDS,
        cron_fields=jobform.CRON_FIELDS,
        interval_fields=jobform.INTERVAL_FIELDS,
        overlaps=jobform.OVERLAPS,
        timezones=timezones(),
        task_key=jobform.task_key,
    )


async def new_job(visit: Visit) -> Response:
    entries = await catalog(visit)
    task = visit.query("task")
    if task is None and entries:
        task = jobform.task_key(entries[0].queue, entries[0].name)
    task = task or ""
    return await _form_page(visit, jobform.blank(task, schema_of(entries, task)), None)


def _values(visit: Visit) -> dict[str, str | None]:
    return {name: visit.form.get(name) for name in visit.form.fields}


async def create_job(visit: Visit) -> Response:
    values = _values(visit)
    spec, form = jobform.read(values, schema_of(await catalog(visit), values.get("task") or ""))
    if spec is None:
        return await _form_page(visit, form, None, 422)
    try:
        made = await _jobs(visit).create(spec)
    except ValidationFailed as e:
        form.problems.extend(e.errors)
        return await _form_page(visit, form, None, 422)
    return visit.redirect(f"{PREFIX}/jobs/{made.id}?notice=job-created")


async def edit_job(visit: Visit) -> Response:
    found = await _jobs(visit).get(job_id_of(visit))
    key = jobform.task_key(found.task.queue, found.task.name)
    form = jobform.from_job(found, schema_of(await catalog(visit), key))
    return await _form_page(visit, form, found)


async def save_job(visit: Visit) -> Response:
    job_id = job_id_of(visit)
    found = await _jobs(visit).get(job_id)
    values = _values(visit)
    spec, form = jobform.read(values, schema_of(await catalog(visit), values.get("task") or ""))
    if spec is None:
        return await _form_page(visit, form, found, 422)
    try:
        await _jobs(visit).replace(job_id, spec)
    except ValidationFailed as e:
        form.problems.extend(e.errors)
        return await _form_page(visit, form, found, 422)
    return visit.redirect(f"{PREFIX}/jobs/{job_id}?notice=job-saved")


async def args_fields(visit: Visit) -> Response:
    """The form's args part for the chosen task (htmx swaps it in when the task changes), as
    fields or as JSON (``mode=json``), keeping what was typed."""
    values = {k: v for k, v in visit.request.query_params.items()}
    task = values.get("task") or ""
    schema = schema_of(await catalog(visit), task)
    as_json = values.get("mode") == "json"
    typed_json = values.get("args_mode") == "json"
    shape, fields = (Shape.JSON, ()) if typed_json else fields_of(schema)
    args, typed = read_args(shape, fields, values)
    # what was typed and does not parse is kept as it is
    form = typed if typed.problems else form_for(schema, args, as_json=as_json)
    return visit.render("_args.html", args=form, task=task)


# --- actions ----------------------------------------------------------------------------------


def _back(visit: Visit, job_id: str, notice: str) -> Response:
    """Back where the button was (the list or the job's page), with the notice."""
    target = visit.form.get("back")
    if target == "list":
        return visit.redirect(f"{PREFIX}/jobs?notice={notice}")
    return visit.redirect(f"{PREFIX}/jobs/{job_id}?notice={notice}")


async def run_now(visit: Visit) -> Response:
    job_id = job_id_of(visit)
    run = await _jobs(visit).run_now(job_id, RunCreate(), visit.principal.name)
    return visit.redirect(f"{PREFIX}/jobs/{job_id}/runs/{run.id}?notice=run-started")


async def pause(visit: Visit) -> Response:
    job_id = job_id_of(visit)
    await _jobs(visit).patch(job_id, JobPatch(active=False))
    return _back(visit, job_id, "job-paused")


async def resume(visit: Visit) -> Response:
    job_id = job_id_of(visit)
    await _jobs(visit).patch(job_id, JobPatch(active=True))
    return _back(visit, job_id, "job-resumed")


async def clone(visit: Visit) -> Response:
    copy = await _jobs(visit).clone(job_id_of(visit))
    return visit.redirect(f"{PREFIX}/jobs/{copy.id}?notice=job-cloned")


async def delete(visit: Visit) -> Response:
    await _jobs(visit).delete(job_id_of(visit))
    return visit.redirect(f"{PREFIX}/jobs?notice=job-deleted")


def routes(admin: Admin) -> list[BaseRoute]:
    one = "/jobs/{job_id}"
    return [
        Route("/jobs", admin.page(jobs), methods=["GET"]),
        Route("/jobs/new", admin.page(new_job), methods=["GET"]),
        Route("/jobs/new", admin.page(create_job, change=True), methods=["POST"]),
        Route("/jobs/args", admin.page(args_fields), methods=["GET"]),
        Route(one, admin.page(job), methods=["GET"]),
        Route(f"{one}/edit", admin.page(edit_job), methods=["GET"]),
        Route(f"{one}/edit", admin.page(save_job, change=True), methods=["POST"]),
        Route(f"{one}/run", admin.page(run_now, change=True), methods=["POST"]),
        Route(f"{one}/pause", admin.page(pause, change=True), methods=["POST"]),
        Route(f"{one}/resume", admin.page(resume, change=True), methods=["POST"]),
        Route(f"{one}/clone", admin.page(clone, change=True), methods=["POST"]),
        Route(f"{one}/delete", admin.page(delete, change=True), methods=["POST"]),
    ]
