"""A job's runs: one run with its status, args and log lines (live until it ends); stop,
restart and delete; and "run now" with other args, another queue, a later start or a note."""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic import JsonValue, ValidationError
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from gateway.admin import jobform
from gateway.admin.argsform import ArgsForm, Shape, fields_of, form_for, read_args
from gateway.admin.pages.jobs import catalog, job_id_of, schema_of
from gateway.admin.web import PREFIX, Admin, Visit, checked
from gateway.core.errors import FieldProblem, ValidationFailed
from sdk.wire import Job, RunCreate, TaskId

TITLE_FIELDS = ("title", "note", "queue", "start_at")


def run_id_of(visit: Visit) -> str:
    return str(checked(TaskId, "run id", visit.path("run_id").upper()))


async def run(visit: Visit) -> Response:
    job_id, run_id = job_id_of(visit), run_id_of(visit)
    jobs = visit.services.jobs
    found = await jobs.run(job_id, run_id)
    logs = await jobs.logs(job_id, run_id)
    return visit.render(
        "run.html",
        "_run.html",
        active="jobs",
        job=await jobs.get(job_id),
        run=found,
        logs=logs.items,
        self_url=visit.here,
    )


async def stop(visit: Visit) -> Response:
    job_id, run_id = job_id_of(visit), run_id_of(visit)
    await visit.services.jobs.stop(job_id, run_id)
    return visit.redirect(f"{PREFIX}/jobs/{job_id}/runs/{run_id}?notice=run-stopped")


async def restart(visit: Visit) -> Response:
    job_id, run_id = job_id_of(visit), run_id_of(visit)
    made = await visit.services.jobs.restart(job_id, run_id, visit.principal.name)
    return visit.redirect(f"{PREFIX}/jobs/{job_id}/runs/{made.id}?notice=run-restarted")


async def delete(visit: Visit) -> Response:
    job_id, run_id = job_id_of(visit), run_id_of(visit)
    await visit.services.jobs.delete_run(job_id, run_id)
    return visit.redirect(f"{PREFIX}/jobs/{job_id}?notice=run-deleted")


# --- run now, with choices --------------------------------------------------------------------


async def _run_form(
    visit: Visit,
    job: Job,
    args: ArgsForm,
    typed: dict[str, str],
    problems: list[FieldProblem],
    status: int = 200,
) -> Response:
    return visit.render(
        "run_form.html",
        status=status,
        active="jobs",
        job=job,
        args=args,
        task=jobform.task_key(job.task.queue, job.task.name),
        picked=typed.get("queue") or job.task.queue,
        picker_placeholder="queue name",
        picker_class="field",
        typed=typed,
        problems=problems,
    )


async def run_form(visit: Visit) -> Response:
    job = await visit.services.jobs.get(job_id_of(visit))
    schema = schema_of(await catalog(visit), jobform.task_key(job.task.queue, job.task.name))
    return await _run_form(visit, job, form_for(schema, job.args), {}, [])


def _start_at(text: str) -> datetime | None:
    """A ``datetime-local`` value, read as UTC (the form says so)."""
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError as e:
        raise ValidationFailed([FieldProblem("start_at", "is not a date and time")]) from e
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


async def start_run(visit: Visit) -> Response:
    job = await visit.services.jobs.get(job_id_of(visit))
    schema = schema_of(await catalog(visit), jobform.task_key(job.task.queue, job.task.name))
    values = {name: visit.form.get(name) for name in visit.form.fields}
    typed = {name: (values.get(name) or "").strip() for name in TITLE_FIELDS}
    as_json = values.get("args_mode") == "json"
    shape, fields = (Shape.JSON, ()) if as_json else fields_of(schema)
    args, shown = read_args(shape, fields, values)
    problems = list(shown.problems)
    if not problems:
        try:
            body = _body(job.args, args, typed)
            made = await visit.services.jobs.run_now(job.id, body, visit.principal.name)
        except ValidationFailed as e:
            problems.extend(e.errors)
        except ValidationError as e:
            problems.extend(jobform.problems_of(e))
        else:
            return visit.redirect(f"{PREFIX}/jobs/{job.id}/runs/{made.id}?notice=run-started")
    return await _run_form(visit, job, shown, typed, problems, 422)


def _body(defaults: JsonValue, args: JsonValue, typed: dict[str, str]) -> RunCreate:
    """The run-now request; args equal to the job's defaults are left out, so its template
    (``{{ last_successful_run }}``) is resolved as for any run."""
    fields: dict[str, object] = {k: v for k, v in typed.items() if v and k != "start_at"}
    fields["start_at"] = _start_at(typed["start_at"])
    if args != defaults:
        fields["args"] = args
    return RunCreate.model_validate({k: v for k, v in fields.items() if v is not None})


def routes(admin: Admin) -> list[BaseRoute]:
    one = "/jobs/{job_id}/runs/{run_id}"
    return [
        Route("/jobs/{job_id}/runs/new", admin.page(run_form), methods=["GET"]),
        Route("/jobs/{job_id}/runs/new", admin.page(start_run, change=True), methods=["POST"]),
        Route(one, admin.page(run), methods=["GET"]),
        Route(f"{one}/stop", admin.page(stop, change=True), methods=["POST"]),
        Route(f"{one}/restart", admin.page(restart, change=True), methods=["POST"]),
        Route(f"{one}/delete", admin.page(delete, change=True), methods=["POST"]),
    ]
