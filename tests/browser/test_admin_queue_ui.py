"""A queue's home page in headless Chromium (issue 31): clicking a queue opens it on its tasks
of every state; every tab keeps its header; the card warns when nothing can take its queued
tasks. No worker process: tasks end through a pull endpoint's callbacks, so this takes
seconds. Screenshots at 1366 and 390 px when JOBGATE_SCREENSHOTS=1."""

from __future__ import annotations

import httpx
from playwright.sync_api import Page, expect

from sdk.wire import PushBatch

from .conftest import screenshot, sign_in

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1366, "height": 900}


def finish(client: httpx.Client, queue: str, endpoint_id: str, kind: str, body: dict) -> None:
    """Lease one task of ``queue`` and end it by the ``kind`` callback (result or error)."""
    leased = client.post(
        f"/v1/queues/{queue}/leases", json={"endpoint_id": endpoint_id, "max_tasks": 1}
    )
    [item] = PushBatch.model_validate_json(leased.content).tasks
    path = "/" + item.callback.split("://", 1)[1].split("/", 1)[1]
    done = client.post(f"{path}/{kind}", json=body, headers={"jobgate-lease": item.lease})
    assert done.status_code == 200, done.text


def hello(client: httpx.Client) -> None:
    """Queue 'hello' as issue 31 found it: 3 succeeded, 1 dead, 1 cancelled, 2 queued, and its
    only endpoint disabled (so the queued ones wait for nothing); queue 'idle', no endpoint."""
    assert client.put("/v1/queues/hello", json={"max_attempts": 1}).status_code == 201
    endpoint = client.post("/v1/queues/hello/endpoints", json={"pull": True}).json()["id"]
    for _ in range(3):
        client.post("/v1/queues/hello/tasks", json={"name": "tasks.greet"})
        finish(client, "hello", endpoint, "result", {"result": "hi"})
    client.post("/v1/queues/hello/tasks", json={"name": "tasks.greet"})
    finish(client, "hello", endpoint, "error", {"error": "ValueError: bad", "retryable": False})
    cancelled = client.post("/v1/queues/hello/tasks", json={"name": "tasks.greet"}).json()
    client.post(f"/v1/tasks/{cancelled['id']}/cancel")
    client.patch(f"/v1/queues/hello/endpoints/{endpoint}", json={"enabled": False})
    for _ in range(2):
        client.post("/v1/queues/hello/tasks", json={"name": "tasks.greet"})
    client.put("/v1/queues/idle", json={})


def test_a_queue_opens_on_every_state_and_its_tabs_keep_the_header(
    page: Page, gateway: str, client: httpx.Client
) -> None:
    hello(client)
    page.set_viewport_size(DESKTOP)
    sign_in(page, gateway)
    card = page.locator('[data-queue="hello"]')
    expect(card.locator('[data-field="unserved"]')).to_contain_text(
        "2 queued tasks, and its endpoint is disabled"
    )
    expect(card.locator('[data-field="ended"]')).to_have_text(
        "3 succeeded, 1 dead, 1 cancelled in 10 min"
    )
    expect(page.locator('[data-field="totals"] [data-state="queued"] .n')).to_have_text("2")
    screenshot(page, "queues-totals")
    page.set_viewport_size(PHONE)
    screenshot(page, "queues-totals-phone")
    page.set_viewport_size(DESKTOP)

    card.get_by_role("link", name="hello").click()
    page.wait_for_url(f"{gateway}/admin/queues/hello")
    rows = page.locator("#queue-tasks tbody tr[data-task]")
    expect(rows).to_have_count(7)  # every state: "all" is the default
    for state in ("succeeded", "dead", "cancelled", "queued"):
        expect(page.locator(f'#queue-tasks tr[data-state="{state}"]').first).to_be_visible()
    expect(page.locator("select[name=state]")).to_have_value("all")
    screenshot(page, "queue")
    page.set_viewport_size(PHONE)
    screenshot(page, "queue-phone")
    page.set_viewport_size(DESKTOP)

    page.select_option("select[name=state]", "dead")
    page.get_by_role("button", name="Show").click()
    expect(rows).to_have_count(1)
    expect(page.locator('#queue-tasks tr[data-state="dead"]')).to_have_count(1)
    page.select_option("select[name=state]", "all")
    page.get_by_role("button", name="Show").click()
    expect(rows).to_have_count(7)

    tabs = page.get_by_role("navigation", name="This queue")
    for tab in ("Endpoints", "Settings", "Jobs", "Tasks"):
        tabs.get_by_role("link", name=tab, exact=True).click()
        expect(page.get_by_role("heading", level=1)).to_have_text("Queue hello")
        expect(tabs.locator('[aria-current="page"]')).to_have_text(tab)
        expect(
            page.locator('[data-field="queue-counts"] [data-state="succeeded"] .n')
        ).to_have_text("3")
        expect(page.locator('[data-field="unserved"]')).to_be_visible()
    tabs.get_by_role("link", name="Endpoints", exact=True).click()
    screenshot(page, "queue-endpoints-unserved")
