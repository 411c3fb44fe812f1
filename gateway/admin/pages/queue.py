"""One queue's endpoints and settings tabs (its home and jobs: ``pages.queue_home``): each
endpoint's figures and the tasks it reported, with enable, disable and secret rotation; the
queue's whole policy and its edit form; purging its finished tasks. Every change goes through
the same service calls as the JSON API."""

from __future__ import annotations

from urllib.parse import quote

from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from gateway.admin import policyform
from gateway.admin.charts import HOUR_WINDOWS, HourChart, hour_chart
from gateway.admin.pages.queue_home import header
from gateway.admin.web import PREFIX, Admin, Visit, checked
from gateway.core.errors import FieldProblem, ValidationFailed
from sdk.wire import (
    CatalogEntry,
    CleanRequest,
    EndpointCreated,
    EndpointPatch,
    Queue,
    QueueName,
    SecretRotation,
    TaskState,
)

CATALOG_LIMIT = 500
FINISHED = tuple(s for s in TaskState if s.finished)
OVERLAPS = (  # the secret rotation's choices: (seconds, label)
    (0, "none: the old secret stops at once"),
    (3600, "1 hour"),
    (86_400, "1 day (the API's default)"),
    (7 * 86_400, "7 days"),
)
PURGE_LIMIT = 100_000  # the API's most per call


def _queue(visit: Visit) -> str:
    return str(checked(QueueName, "queue", visit.path("queue")))


def _base(visit: Visit) -> str:
    """This queue's pages: ``/admin/queues/<queue>``."""
    return f"{PREFIX}/queues/{quote(visit.path('queue'), safe='')}"


async def _hour(visit: Visit, queue: str) -> HourChart:
    return hour_chart(await visit.services.activity.throughput(queue, windows=HOUR_WINDOWS))


async def _endpoints_page(
    visit: Visit, created: EndpointCreated | None = None, partial: str = "_endpoints.html"
) -> Response:
    queue = _queue(visit)
    found = await visit.services.queues.get(queue)
    endpoints = await visit.services.queues.endpoints(queue)
    catalog = await visit.services.catalog.page(queue, None, None, CATALOG_LIMIT)
    served: dict[str, list[CatalogEntry]] = {}
    for entry in catalog.items:
        for e in entry.endpoints:
            served.setdefault(e.id, []).append(entry)
    return visit.render(
        "endpoints.html",
        partial,
        active="queues",
        queue=found,
        tab="endpoints",
        hour=None if visit.partial else await _hour(visit, queue),  # outside the live part
        **await header(visit, found, endpoints.items),
        endpoints=endpoints.items,
        served=served,
        overlaps=OVERLAPS,
        created=created,
        self_url=f"{_base(visit)}/endpoints",
    )


async def endpoints(visit: Visit) -> Response:
    return await _endpoints_page(visit)


async def _set_enabled(visit: Visit, enabled: bool) -> Response:
    queue = _queue(visit)
    await visit.services.queues.set_enabled(
        queue, visit.path("endpoint_id"), EndpointPatch(enabled=enabled)
    )
    notice = "endpoint-enabled" if enabled else "endpoint-disabled"
    return visit.redirect(f"{_base(visit)}/endpoints?notice={notice}")


async def enable(visit: Visit) -> Response:
    return await _set_enabled(visit, True)


async def disable(visit: Visit) -> Response:
    return await _set_enabled(visit, False)


async def rotate(visit: Visit) -> Response:
    """The new secret is shown in this answer only (never stored to be shown again). With
    htmx the answer is the secret alone, swapped into the page, so reloading the page does not
    post the rotation again; without JavaScript it is the whole page."""
    spec = SecretRotation.model_validate({"overlap": visit.form.get("overlap") or 86_400})
    created = await visit.services.queues.rotate_secret(
        _queue(visit), visit.path("endpoint_id"), spec
    )
    return await _endpoints_page(visit, created, "_secret.html")


async def settings(visit: Visit) -> Response:
    queue = await visit.services.queues.get(_queue(visit))
    return await _settings_page(visit, queue, policyform.form_for(queue.policy))


async def _settings_page(visit: Visit, queue: Queue, form: policyform.PolicyForm) -> Response:
    return visit.render(
        "settings.html",
        active="queues",
        queue=queue,
        tab="settings",
        hour=await _hour(visit, queue.name),
        **await header(visit, queue),
        form=form,
        status=422 if form.problems else 200,
    )


async def save_settings(visit: Visit) -> Response:
    name = _queue(visit)
    queue = await visit.services.queues.get(name)
    patch, form = policyform.read(visit.form.fields, queue.policy)
    if patch is None:
        return await _settings_page(visit, queue, form)
    if not patch.model_fields_set:
        return visit.redirect(f"{_base(visit)}/settings?notice=unchanged")
    await visit.services.queues.patch(name, patch)
    return visit.redirect(f"{_base(visit)}/settings?notice=settings-saved")


def _purge_request(visit: Visit) -> CleanRequest:
    chosen = visit.form.getlist("states") if visit.request.method == "POST" else None
    if chosen is None:
        chosen = [s for s in visit.request.query_params.getlist("states") if s]
    states = [checked(TaskState, "states", s) for s in chosen] or list(FINISHED)
    return CleanRequest(states=states, limit=PURGE_LIMIT)


async def purge_form(visit: Visit) -> Response:
    """The confirmation step: what would be deleted, counted now."""
    queue = await visit.services.queues.get(_queue(visit))
    request = _purge_request(visit)
    return visit.render(
        "purge.html",
        active="queues",
        queue=queue,
        tab="settings",
        hour=None,
        **await header(visit, queue),
        finished=FINISHED,
        chosen=request.states,
        count=sum(queue.counts.get(s, 0) for s in request.states),
        limit=PURGE_LIMIT,
    )


async def purge(visit: Visit) -> Response:
    if visit.form.get("confirm") != "yes":
        raise ValidationFailed([FieldProblem("confirm", "tick the box to confirm")])
    result = await visit.services.operations.clean(_queue(visit), _purge_request(visit))
    return visit.redirect(f"{_base(visit)}/settings?notice=purged&n={result.deleted}")


def routes(admin: Admin) -> list[BaseRoute]:
    base = "/queues/{queue}"
    ep = base + "/endpoints/{endpoint_id}"
    return [
        Route(base + "/endpoints", admin.page(endpoints), methods=["GET"]),
        Route(ep + "/enable", admin.page(enable, change=True), methods=["POST"]),
        Route(ep + "/disable", admin.page(disable, change=True), methods=["POST"]),
        Route(ep + "/secret", admin.page(rotate, change=True), methods=["POST"]),
        Route(base + "/settings", admin.page(settings), methods=["GET"]),
        Route(base + "/settings", admin.page(save_settings, change=True), methods=["POST"]),
        Route(base + "/purge", admin.page(purge_form), methods=["GET"]),
        Route(base + "/purge", admin.page(purge, change=True), methods=["POST"]),
    ]
