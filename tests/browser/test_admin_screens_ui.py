"""Every admin page at 1366 and 390 px (issue 31's screenshot review): one gateway, a little
data (a queue with tasks of several states, a pull endpoint, a job and its run, a trigger and
its event), no worker process (tasks end through the pull endpoint's callbacks). At 390 px no
page scrolls sideways and each page's headline and main action are on the screen. With
JOBGATE_SCREENSHOTS=1 each page is saved at both widths as
docs/screenshots/review/<page>-1366.png and <page>-390.png (docs/screenshots/README.md is the
review of those pictures)."""

from __future__ import annotations

from dataclasses import dataclass

import httpx
from playwright.sync_api import Browser, BrowserContext, Page, expect

from sdk.wire import PushBatch

from .conftest import screenshot, sign_in
from .test_admin_phone_ui import NIGHTLY, inside
from .test_admin_queue_ui import finish
from .test_admin_ui import until

WIDTHS = {1366: 900, 390: 844}
EXTRA_QUEUES = 8  # past 8 queues the queues page is a table


@dataclass(frozen=True, slots=True)
class Seen:
    """What the walk needs to reach each page."""

    dead: str
    job: str
    run: str


@dataclass(frozen=True, slots=True)
class Screen:
    """One admin page: its picture's name, its path, and what must be on screen at 390 px."""

    name: str
    path: str
    shown: tuple[str, ...]  # CSS selectors, each visible and inside the viewport's width
    status: int = 200


def data(client: httpx.Client) -> Seen:
    """Queue 'hello': 2 succeeded, 1 dead, 1 cancelled, 1 running (leased, with progress),
    1 scheduled, 2 queued; a pull endpoint; a job into it in Europe/Berlin with one run; a
    trigger and the event that started its task."""
    assert client.put("/v1/queues/hello", json={"max_attempts": 1}).status_code == 201
    endpoint = client.post("/v1/queues/hello/endpoints", json={"pull": True}).json()["id"]
    for _ in range(2):
        client.post("/v1/queues/hello/tasks", json={"name": "tasks.greet", "owner": "ana"})
        finish(client, "hello", endpoint, "result", {"result": {"greeting": "hi"}})
    dead = client.post("/v1/queues/hello/tasks", json={"name": "tasks.charge"}).json()["id"]
    error = {"error": "TimeoutError: the carrier's API did not answer", "retryable": False}
    finish(client, "hello", endpoint, "error", error)
    cancelled = client.post("/v1/queues/hello/tasks", json={"name": "tasks.greet"}).json()
    client.post(f"/v1/tasks/{cancelled['id']}/cancel")
    client.post("/v1/queues/hello/tasks", json={"name": "tasks.report", "payload": {"args": [1]}})
    leased = client.post("/v1/queues/hello/leases", json={"endpoint_id": endpoint, "max_tasks": 1})
    [item] = PushBatch.model_validate_json(leased.content).tasks
    path = "/" + item.callback.split("://", 1)[1].split("/", 1)[1]
    beat = client.post(
        f"{path}/heartbeat", json={"progress": 0.4}, headers={"jobgate-lease": item.lease}
    )
    assert beat.status_code == 200, beat.text
    client.post("/v1/queues/hello/tasks", json={"name": "tasks.greet", "delay": 3600})
    for _ in range(2):
        client.post("/v1/queues/hello/tasks", json={"name": "tasks.greet"})
    job = client.post(
        "/v1/jobs",
        json={
            "title": "Nightly reminders",
            "task": {"queue": "hello", "name": "tasks.greet"},
            "args": {"args": ["reminders"]},
            "schedule": NIGHTLY,
        },
    )
    assert job.status_code == 201, job.text
    run = client.post(f"/v1/jobs/{job.json()['id']}/runs", json={})
    assert run.status_code == 201, run.text
    trigger = {"event": "order.paid", "queue": "hello", "task": "tasks.greet"}
    assert client.put("/v1/triggers/paid", json=trigger).status_code in (200, 201)
    sent = client.post("/v1/events", json={"name": "order.paid", "data": {"order": 42}})
    assert sent.status_code in (200, 201, 202), sent.text
    until(
        lambda: client.get("/v1/events").json()["items"][0]["state"] == "done",
        what="the event's task",
    )
    return Seen(dead=dead, job=job.json()["id"], run=run.json()["id"])


def screens(seen: Seen) -> list[Screen]:
    """Every admin page a GET shows, in menu order."""
    h1 = ("h1",)
    job, run = f"/admin/jobs/{seen.job}", f"/admin/jobs/{seen.job}/runs/{seen.run}"
    return [
        Screen("queues", "/admin/queues", ('[data-queue="hello"] a',)),
        Screen("queue", "/admin/queues/hello", (*h1, "#queue-tasks tbody tr td:first-child")),
        Screen("queue-jobs", "/admin/queues/hello/jobs", h1),
        Screen(
            "queue-endpoints",
            "/admin/queues/hello/endpoints",
            (*h1, "[data-endpoint] button", "[data-endpoint] form.rotate button"),
        ),
        Screen("queue-settings", "/admin/queues/hello/settings", h1),
        Screen("queue-purge", "/admin/queues/hello/purge", h1),
        Screen(
            "tasks", "/admin/tasks?queue=hello&state=succeeded", (*h1, "tbody tr td:first-child")
        ),
        Screen("tasks-scheduled", "/admin/tasks?queue=hello&state=scheduled", h1),
        Screen("task", f"/admin/tasks/{seen.dead}", (*h1, "[data-field=timeline]")),
        Screen("running", "/admin/running", (*h1, "tbody tr progress")),
        Screen("dead-letters", "/admin/deadletters", (*h1, "tbody tr td:first-child")),
        Screen("bulk-cancel", "/admin/bulk/cancel?queue=hello&state=queued", h1),
        Screen("jobs", "/admin/jobs", (*h1, "tbody tr td:first-child", "td.row-actions button")),
        Screen("job", job, (*h1, "main form button")),
        Screen("job-new", "/admin/jobs/new", h1),
        Screen("job-edit", f"{job}/edit", h1),
        Screen("run-new", f"{job}/runs/new", h1),
        Screen("run", run, h1),
        Screen("events", "/admin/events", (*h1, "[data-touched=started] a")),
        Screen("find-none", "/admin/find?id=01NOSUCHTASK", h1, status=404),
        Screen("not-found", "/admin/no-such-page", h1, status=404),
    ]


def look(page: Page, width: int, name: str, shown: tuple[str, ...] = ()) -> None:
    """At 390 px: ``shown`` is on screen and neither the page nor a table scrolls sideways; the
    picture at either width."""
    if width < 640:
        inside(page, [page.locator(selector).first for selector in shown])
    screenshot(page, f"review/{name}-{width}")


def walk(context: BrowserContext, gateway: str, seen: Seen, width: int) -> None:
    page = context.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.on(
        "console",
        lambda m: problems.append(m.text) if "Content Security Policy" in m.text else None,
    )
    page.goto(gateway + "/admin/login")
    look(page, width, "sign-in", ("input[name=api_key]", "button[type=submit]"))
    sign_in(page, gateway)
    for screen in screens(seen):
        answer = page.goto(gateway + screen.path)
        assert answer is not None, screen
        assert answer.status == screen.status, (screen, answer.status)
        look(page, width, screen.name, screen.shown)
    assert not problems, problems
    page.close()


def test_every_admin_page_fits_a_phone_and_a_laptop(
    browser: Browser, gateway: str, client: httpx.Client
) -> None:
    seen = data(client)
    for width, height in WIDTHS.items():
        context = browser.new_context(viewport={"width": width, "height": height})
        context.set_default_timeout(15_000)
        walk(context, gateway, seen, width)
        context.close()
    for n in range(EXTRA_QUEUES):
        client.put(f"/v1/queues/reports-{n}", json={})
    for width, height in WIDTHS.items():
        context = browser.new_context(viewport={"width": width, "height": height})
        page = context.new_page()
        sign_in(page, gateway)
        expect(page.locator("table").first).to_be_visible()
        look(page, width, "queues-table", ("h1",))
        context.close()
