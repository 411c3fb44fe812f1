"""Find a task or a run by its id, from the search box every page's header carries: a run's
page when a job has a run with that id (a run's task has the same id), else the task's page,
else a page saying nothing has it."""

from __future__ import annotations

from pydantic import TypeAdapter, ValidationError
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from gateway.admin.web import PREFIX, Admin, Visit
from gateway.core.errors import TaskNotFound
from sdk.wire import TaskId

_ID = TypeAdapter(TaskId)


async def find(visit: Visit) -> Response:
    typed = (visit.query("id") or "")[:100]
    try:
        wanted = str(_ID.validate_python(typed.upper()))
    except ValidationError:
        return visit.render("find.html", status=404, typed=typed, valid=False)
    job_id = await visit.services.jobs.job_of_run(wanted)
    if job_id is not None:
        return visit.redirect(f"{PREFIX}/jobs/{job_id}/runs/{wanted}")
    try:
        await visit.services.tasks.locate(wanted)
    except TaskNotFound:
        return visit.render("find.html", status=404, typed=typed, valid=True)
    return visit.redirect(f"{PREFIX}/tasks/{wanted}")


def routes(admin: Admin) -> list[BaseRoute]:
    return [Route("/find", admin.page(find), methods=["GET"])]
