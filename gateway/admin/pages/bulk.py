"""Bulk cancel and bulk delete of the tasks matching a filter, each behind a confirmation
page that counts them first: cancel any unfinished state (``POST
/v1/queues/{queue}/tasks/cancel``'s service), delete finished ones, dead letters included
(``POST /v1/queues/{queue}/clean``'s service, which filters by name, not by owner)."""

from __future__ import annotations

from urllib.parse import urlencode

from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from gateway.admin.web import PREFIX, Admin, Form, Visit, checked
from gateway.core.errors import FieldProblem, InvalidRequest, ValidationFailed
from gateway.services.bulk import cancel_matching, matching_ids
from sdk.wire import CancelMatching, CleanRequest, Label, QueueName, TaskName, TaskState

CANCEL_LIMIT = 1000  # the API's most per call
DELETE_LIMIT = 10_000  # what one click deletes (the clean API takes up to 100,000)
FIELDS = ("queue", "state", "name", "owner")


def _filter(get: dict[str, str | None]) -> tuple[str, TaskState, str | None, str | None]:
    queue, state = get.get("queue"), get.get("state") or TaskState.QUEUED.value
    if queue is None:
        raise InvalidRequest("queue: pick a queue first")
    name, owner = get.get("name"), get.get("owner")
    return (
        str(checked(QueueName, "queue", queue)),
        checked(TaskState, "state", state),
        None if name is None else str(checked(TaskName, "name", name)),
        None if owner is None else str(checked(Label, "owner", owner)),
    )


def _from_query(visit: Visit) -> tuple[str, TaskState, str | None, str | None]:
    return _filter({f: visit.query(f) for f in FIELDS})


def _from_form(form: Form) -> tuple[str, TaskState, str | None, str | None]:
    return _filter({f: (form.get(f) or "").strip() or None for f in FIELDS})


def _back(queue: str, state: TaskState, name: str | None, owner: str | None, **more: object) -> str:
    query = {"queue": queue, "state": state.value, "name": name, "owner": owner, **more}
    page = "deadletters" if state is TaskState.DEAD else "tasks"
    if page == "deadletters":
        query.pop("state")
    return f"{PREFIX}/{page}?" + urlencode({k: v for k, v in query.items() if v is not None})


async def confirm(visit: Visit) -> Response:
    """The confirmation step: what the action would touch, counted now."""
    action = visit.path("action")
    queue, state, name, owner = _from_query(visit)
    if action == "cancel":
        if state.finished:
            raise InvalidRequest("state: only unfinished tasks can be cancelled")
        limit = CANCEL_LIMIT
    else:
        if not state.finished:
            raise InvalidRequest("state: only finished tasks can be deleted (cancel the others)")
        limit = DELETE_LIMIT
    if name is None and owner is None:
        count = min((await visit.services.queues.get(queue)).counts.get(state, 0), limit)
    else:
        count = len(
            await matching_ids(visit.services.tasks, queue, state, limit, name=name, owner=owner)
        )
    return visit.render(
        "bulk.html",
        active="tasks",
        action=action,
        queue=queue,
        state=state,
        name=name,
        owner=owner,
        count=count,
        limit=limit,
        back=_back(queue, state, name, owner),
    )


async def run(visit: Visit) -> Response:
    action = visit.path("action")
    if visit.form.get("confirm") != "yes":
        raise ValidationFailed([FieldProblem("confirm", "tick the box to confirm")])
    queue, state, name, owner = _from_form(visit.form)
    if action == "cancel":
        request = CancelMatching(state=state, name=name, owner=owner, limit=CANCEL_LIMIT)
        result = await cancel_matching(visit.services.tasks, queue, request)
        counts = {
            "n": len(result.cancelled),
            "requested": len(result.cancel_requested),
            "skipped": len(result.skipped),
        }
        return visit.redirect(_back(queue, state, name, owner, notice="bulk-cancelled", **counts))
    clean = CleanRequest(states=[state], name=name, owner=owner, limit=DELETE_LIMIT)
    deleted = (await visit.services.operations.clean(queue, clean)).deleted
    return visit.redirect(_back(queue, state, name, owner, notice="purged", n=deleted))


def routes(admin: Admin) -> list[BaseRoute]:
    path = "/bulk/{action:str}"
    return [
        Route(path, admin.page(confirm), methods=["GET"]),
        Route(path, admin.page(run, change=True), methods=["POST"]),
    ]
