"""A queue's endpoints and settings, the operators' actions and the reading aids, in headless
Chromium against a real gateway, real workers and a real Redis: one walk through every new
view (few browser starts keep the folder fast), then a read-only session seeing no control."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
from playwright.sync_api import Browser, Page, expect

from tests.e2e.conftest import Cluster
from tests.support import free_port

from .conftest import READER, screenshot, sign_in
from .test_admin_ui import ECHO, SLOW, dead_letters, until

PHONE = {"width": 390, "height": 844}
SCHEMA = {"type": "object", "properties": {"args": {"type": "array"}}}


def serve_e2e(cluster: Cluster, client: httpx.Client, tmp_path: Path) -> str:
    """Queue 'e2e' served by the SDK worker, whose endpoint reported its tasks; its id."""
    assert client.put("/v1/queues/e2e", json={}).status_code == 201
    port = free_port()
    endpoint = client.post(
        "/v1/queues/e2e/endpoints", json={"url": f"http://127.0.0.1:{port}/"}
    ).json()
    tasks = {"tasks": [{"name": n, "schema": SCHEMA} for n in (ECHO, SLOW)]}
    reported = client.put(f"/v1/queues/e2e/endpoints/{endpoint['id']}/tasks", json=tasks)
    assert reported.status_code == 200, reported.text
    cluster.worker(endpoint["secret"], port, tmp_path / "pushes.jsonl")
    return str(endpoint["id"])


def test_operator_manages_endpoints_settings_and_bulk_actions_and_reads_at_a_glance(
    page: Page,
    browser: Browser,
    cluster: Cluster,
    gateway: str,
    client: httpx.Client,
    tmp_path: Path,
) -> None:
    endpoint_id = serve_e2e(cluster, client, tmp_path)
    dead_letters(cluster, client, tmp_path, 2)
    for _ in range(3):
        echo = client.post("/v1/queues/e2e/tasks", json={"name": ECHO, "payload": {"args": [1]}})
        client.get(f"/v1/tasks/{echo.json()['id']}", params={"wait": 20})
    slow_id = client.post(
        "/v1/queues/e2e/tasks", json={"name": SLOW, "payload": {"args": [60]}}
    ).json()["id"]
    until(lambda: client.get(f"/v1/tasks/{slow_id}").json()["progress"] == 0.5, what="heartbeat")
    asked: list[str] = []
    page.on("dialog", lambda d: asked.append(d.message))
    sign_in(page, gateway)

    # Endpoints: URL, push, circuit, in flight, the tasks it reported; the hour chart.
    page.locator('[data-queue="e2e"]').get_by_role("link", name="Endpoints").click()
    row = page.locator(f'[data-endpoint="{endpoint_id}"]')
    expect(row).to_contain_text("127.0.0.1")
    expect(row.locator('[data-field="circuit"]')).to_have_text("circuit closed")
    expect(row.locator('[data-field="in-flight"]')).to_have_text("1 / 10")
    expect(row).to_contain_text(ECHO)
    expect(page.locator('[data-field="hour-chart"]')).to_contain_text("3 succeeded")
    screenshot(page, "endpoints")
    row.get_by_role("button", name="Disable").click()
    expect(page.locator(".notice")).to_contain_text("Endpoint disabled")
    assert asked[-1].startswith("Disable this endpoint?")
    expect(row.locator('[data-field="state"]')).to_contain_text("disabled by an admin")
    assert client.get("/v1/queues/e2e/endpoints").json()["items"][0]["enabled"] is False
    row.get_by_role("button", name="Enable").click()
    expect(page.locator(".notice")).to_contain_text("Endpoint enabled")
    row.locator("select[name=overlap]").select_option("3600")
    row.get_by_role("button", name="Rotate secret").click()
    secret = page.locator('[data-field="new-secret"]')
    expect(secret).to_contain_text("whsec_")
    expect(secret).to_contain_text("shown this once")
    screenshot(page, "endpoint-secret")
    page.reload()  # shown once: a reload (a GET) does not show it again
    expect(page.locator('[data-field="new-secret"]')).to_have_count(0)

    # Settings: the API's messages per field, nothing saved; then saved; sections toggle.
    page.get_by_role("link", name="Settings").click()
    expect(page.locator('input[name="rate_limit.per_second"]')).to_be_disabled()
    page.fill('input[name="max_attempts"]', "0")
    page.fill('input[name="backoff.max_delay"]', "-0.1")
    page.get_by_role("button", name="Save settings").click()
    expect(page.locator('[data-problem="max_attempts"]')).to_contain_text(
        "greater than or equal to 1"
    )
    expect(page.locator('[data-problem="backoff.max_delay"]')).to_contain_text(
        "greater than or equal to 0"
    )
    assert client.get("/v1/queues/e2e").json()["policy"]["max_attempts"] == 5
    page.fill('input[name="max_attempts"]', "3")
    page.fill('input[name="backoff.max_delay"]', "300")
    page.check('input[name="use.rate_limit"]')
    page.fill('input[name="rate_limit.per_second"]', "50")
    screenshot(page, "settings")
    page.get_by_role("button", name="Save settings").click()
    expect(page.locator(".notice")).to_contain_text("Settings saved")
    policy = client.get("/v1/queues/e2e").json()["policy"]
    assert (policy["max_attempts"], policy["rate_limit"]) == (3, {"per_second": 50, "burst": 1})

    # Running: cancel from the row, after a confirmation; back on the running page.
    page.get_by_role("link", name="Running", exact=True).click()
    page.locator(f'[data-task="{slow_id}"]').get_by_role("button", name="Cancel").click()
    expect(page.locator(".notice")).to_contain_text("Cancelled")
    expect(page).to_have_url(re.compile(r"/admin/running\?notice=cancelled"))
    assert asked[-1].startswith(f"Cancel task {slow_id}?")

    # The task: attempts show the endpoint's URL; logs grouped by attempt; local times.
    page.goto(f"{gateway}/admin/tasks/{slow_id}")
    expect(page.locator('[data-state="cancelled"]')).to_be_visible(timeout=10_000)
    expect(page.locator('[data-field="endpoint"]').first).to_contain_text("http://127.0.0.1")
    expect(page.locator('.log-group[data-attempt="1"]')).to_contain_text("attempt 1 started")
    created = page.locator("time[data-local]").first
    expect(created).to_have_attribute("title", re.compile(r" UTC$"))

    # Dead letters: the total, and a confirmation before resubmitting all matching.
    page.goto(f"{gateway}/admin/deadletters?queue=mail")
    expect(page.locator('[data-field="dead-total"]')).to_contain_text("2 dead letters in mail")
    expect(page.locator("[data-task]")).to_have_count(2)
    page.get_by_role("button", name="Resubmit all matching (up to 1,000)").click()
    expect(page.locator(".notice")).to_contain_text("2 tasks queued again")
    assert asked[-1].startswith("Resubmit every dead letter matching this filter (2 dead")

    # Purge: counted, confirmed, done.
    page.goto(f"{gateway}/admin/queues/e2e/purge")
    expect(page.locator('[data-field="count"]')).to_contain_text("4 finished tasks")
    page.check("input[name=confirm]")
    page.get_by_role("button", name="Purge").click()
    expect(page.locator(".notice")).to_contain_text("4 finished tasks deleted")
    screenshot(page, "settings-purged")

    # The job form: cron fields only usable with a crontab schedule.
    page.goto(f"{gateway}/admin/jobs/new")
    page.check("input[name=schedule][value=none]")
    expect(page.locator('input[name="cron.minute"]')).to_be_disabled()
    page.check("input[name=schedule][value=crontab]")
    expect(page.locator('input[name="cron.minute"]')).to_be_enabled()

    # A phone: rows show state, time and error without scrolling sideways.
    page.set_viewport_size(PHONE)
    client.put("/v1/queues/mail", json={"max_attempts": 1})
    until(lambda: client.get("/v1/queues/mail").json()["counts"]["dead"] == 2, what="dead again")
    page.goto(f"{gateway}/admin/tasks?queue=mail&state=dead")
    first = page.locator("[data-task]").first
    expect(first.locator(".badge.dead")).to_be_visible()
    expect(first.locator("td.err")).to_be_visible()
    expect(first.locator("td.err")).to_contain_text("500")
    for path in ("/admin/tasks?queue=mail&state=dead", "/admin/queues/e2e/endpoints"):
        page.goto(gateway + path)
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= PHONE["width"], f"{path} is {width}px wide on a 390px screen"
    screenshot(page, "endpoints-phone")
    page.goto(f"{gateway}/admin/tasks?queue=mail&state=dead")
    screenshot(page, "tasks-phone")

    # Bulk: cancel every queued task matching, delete every dead letter matching; each counted
    # on a confirmation page first.
    client.patch("/v1/queues/e2e", json={"paused": True})
    for _ in range(2):
        client.post("/v1/queues/e2e/tasks", json={"name": ECHO, "payload": {"args": [2]}})
    page.goto(f"{gateway}/admin/tasks?queue=e2e&name={ECHO}")
    page.get_by_role("link", name="Cancel all matching…").click()
    expect(page.locator('[data-field="count"]')).to_contain_text("2 tasks match")
    screenshot(page, "bulk-cancel-phone")
    page.check("input[name=confirm]")
    page.get_by_role("button", name="Cancel them").click()
    expect(page.locator(".notice")).to_contain_text("2 tasks cancelled")
    assert client.get("/v1/queues/e2e").json()["counts"]["queued"] == 0
    page.goto(f"{gateway}/admin/deadletters?queue=mail")
    page.get_by_role("link", name="Delete all matching…").click()
    expect(page.locator('[data-field="count"]')).to_contain_text("2 tasks match")
    page.check("input[name=confirm]")
    page.get_by_role("button", name="Delete them").click()
    expect(page.locator(".notice")).to_contain_text("2 finished tasks deleted")
    expect(page.locator('[data-field="dead-total"]')).to_contain_text("0 dead letters")

    # Read-only: the same views, no change control.
    reader = browser.new_context(viewport=PHONE)
    other = reader.new_page()
    try:
        sign_in(other, gateway, READER, "/admin/queues/e2e/settings")
        expect(other.locator('[data-field="max_attempts"]')).to_have_text("3")
        expect(other.locator("form.policy")).to_have_count(0)
        expect(other.get_by_role("button", name="Save settings")).to_have_count(0)
        expect(other.get_by_role("link", name="Purge finished tasks…")).to_have_count(0)
        screenshot(other, "settings-readonly-phone")
        other.goto(f"{gateway}/admin/queues/e2e/endpoints")
        expect(other.locator(f'[data-endpoint="{endpoint_id}"]')).to_contain_text("127.0.0.1")
        for name in ("Disable", "Enable", "Rotate secret"):
            expect(other.get_by_role("button", name=name)).to_have_count(0)
        other.goto(f"{gateway}/admin/queues/e2e/purge")
        expect(other.get_by_role("button", name="Purge")).to_have_count(0)
        other.goto(f"{gateway}/admin/running")
        expect(other.get_by_role("button", name="Cancel")).to_have_count(0)
        other.goto(f"{gateway}/admin/deadletters?queue=mail")
        expect(other.get_by_role("button", name=re.compile("Resubmit"))).to_have_count(0)
        other.goto(f"{gateway}/admin/tasks?queue=e2e&state=cancelled")
        expect(other.get_by_role("link", name="Delete all matching…")).to_have_count(0)
        other.goto(f"{gateway}/admin/bulk/delete?queue=e2e&state=cancelled")
        expect(other.locator('[data-field="count"]')).to_contain_text(re.compile(r"tasks? match"))
        expect(other.get_by_role("button", name="Delete them")).to_have_count(0)
    finally:
        reader.close()
