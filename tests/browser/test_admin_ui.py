"""The admin UI in headless Chromium, against a real gateway process, real worker processes
(an SDK worker and one that answers every push with 500) and a real Redis."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from playwright.sync_api import Page, expect

from tests.e2e.conftest import ADMIN, Cluster
from tests.support import free_port

from .conftest import READER, screenshot, sign_in

SLOW = "tests.e2e.worker_app.slow"
ECHO = "tests.e2e.worker_app.echo"


def until(check: Callable[[], Any], timeout: float = 20, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def sdk_worker(cluster: Cluster, client: httpx.Client, tmp_path: Path) -> None:
    """The e2e SDK worker serving queue 'e2e'."""
    assert client.put("/v1/queues/e2e", json={}).status_code == 201
    port = free_port()
    endpoint = client.post(
        "/v1/queues/e2e/endpoints", json={"url": f"http://127.0.0.1:{port}/"}
    ).json()
    cluster.worker(endpoint["secret"], port, tmp_path / "pushes.jsonl")


def dead_letters(cluster: Cluster, client: httpx.Client, tmp_path: Path, n: int) -> list[str]:
    """``n`` dead tasks in queue 'mail': one attempt each, answered 500 by a failing worker."""
    assert client.put("/v1/queues/mail", json={"max_attempts": 1}).status_code == 201
    port = free_port()
    client.post("/v1/queues/mail/endpoints", json={"url": f"http://127.0.0.1:{port}/"})
    cluster.worker("unused", port, tmp_path / "failing.jsonl", app="tests.e2e.failing_app:app")
    tasks = [{"name": "send_mail", "payload": {"to": f"user{i}@example.com"}} for i in range(n)]
    created = client.post("/v1/queues/mail/tasks/batch", json={"tasks": tasks}).json()["tasks"]
    until(
        lambda: len(client.get("/v1/deadletters", params={"queue": "mail"}).json()["items"]) == n,
        what=f"{n} dead letters",
    )
    return [t["id"] for t in created]


def paused(client: httpx.Client, queue: str) -> bool:
    return bool(client.get(f"/v1/queues/{queue}").json()["policy"]["paused"])


def test_operator_sees_queues_live_pauses_filters_opens_a_task_and_resubmits_dead_letters(
    page: Page, cluster: Cluster, gateway: str, client: httpx.Client, tmp_path: Path
) -> None:
    sdk_worker(cluster, client, tmp_path)
    dead = dead_letters(cluster, client, tmp_path, 3)
    echo = client.post(
        "/v1/queues/e2e/tasks", json={"name": ECHO, "payload": {"args": [{"hello": "admin"}]}}
    ).json()
    done = client.get(f"/v1/tasks/{echo['id']}", params={"wait": 20}).json()
    assert done["state"] == "succeeded"
    slow = client.post("/v1/queues/e2e/tasks", json={"name": SLOW, "payload": {"args": [60]}})
    slow_id = slow.json()["id"]
    until(lambda: client.get(f"/v1/tasks/{slow_id}").json()["progress"] == 0.5, what="heartbeat")

    # Signing in from a deep link lands on that page.
    page.goto(f"{gateway}/admin/queues")
    expect(page).to_have_url(re.compile(r"/admin/login\?next="))
    screenshot(page, "sign-in")
    sign_in(page, gateway)
    mail = page.locator('[data-queue="mail"]')
    expect(mail.locator('[data-state="dead"] .n')).to_have_text("3")
    expect(page.locator('[data-queue="e2e"] [data-state="running"] .n')).to_have_text("1")
    screenshot(page, "queues")

    # Pause and resume from the queue's card; then the counts move live, without a reload.
    mail.get_by_role("button", name="Pause").click()
    expect(page.locator(".notice")).to_contain_text("Queue paused")
    expect(mail.locator(".badge.paused")).to_be_visible()
    assert paused(client, "mail")
    page.evaluate("window.__sameDocument = true")
    late = client.post("/v1/queues/mail/tasks", json={"name": "send_mail"}).json()
    expect(mail.locator('[data-state="queued"] .n')).to_have_text("1", timeout=10_000)
    assert page.evaluate("window.__sameDocument") is True  # htmx swapped a part, no reload
    mail.get_by_role("button", name="Resume").click()
    expect(page.locator(".notice")).to_contain_text("Queue resumed")
    assert not paused(client, "mail")
    expect(mail.locator('[data-state="dead"] .n')).to_have_text("4")  # the late one failed too
    dead.append(late["id"])
    mail.get_by_role("button", name="Pause").click()  # keep resubmitted tasks in view
    expect(mail.locator(".badge.paused")).to_be_visible()

    # Tasks: filter by queue, state and name; open one with its result, attempts and logs.
    page.get_by_role("link", name="Tasks", exact=True).click()
    page.fill("input[name=queue]", "e2e")
    page.select_option("select[name=state]", "succeeded")
    page.fill("input[name=name]", ECHO)
    page.get_by_role("button", name="Filter").click()
    expect(page.locator("[data-task]")).to_have_count(1)
    screenshot(page, "tasks")
    page.get_by_role("link", name=echo["id"]).click()
    expect(page.locator('[data-state="succeeded"]')).to_be_visible()
    expect(page.locator('[data-field="result"]')).to_contain_text('"hello": "admin"')
    page.goto(f"{gateway}/admin/tasks/{slow_id}")
    expect(page.locator('[data-field="logs"]')).to_contain_text("attempt 1 started")
    expect(page.locator('[data-field="checkpoint"]')).to_contain_text('"step": 1')
    screenshot(page, "task")

    # Running now: where, for how long, the last heartbeat and progress.
    page.get_by_role("link", name="Running", exact=True).click()
    row = page.locator(f'[data-task="{slow_id}"]')
    expect(row).to_contain_text("50 %")
    expect(row).to_contain_text("127.0.0.1")

    # Cancel the running task from its page: it stops at its next heartbeat.
    row.get_by_role("link", name=slow_id).click()
    page.get_by_role("button", name="Cancel").click()
    expect(page.locator(".notice")).to_contain_text("Cancelled")
    expect(page.locator('[data-state="cancelled"]')).to_be_visible(timeout=10_000)

    # Dead letters: filter, select all, resubmit; they go back to the (paused) queue.
    page.get_by_role("link", name="Dead letters").click()
    page.fill("input[name=queue]", "mail")
    page.get_by_role("button", name="Filter").click()
    expect(page.locator("[data-task]")).to_have_count(4)
    page.check("input[data-select-all]")
    page.wait_for_timeout(2500)  # a live refresh is due meanwhile: it must keep the selection
    expect(page.locator("input[name=ids]:checked")).to_have_count(4)
    page.get_by_role("button", name="Resubmit selected").click()
    expect(page.locator(".notice")).to_contain_text("4 tasks queued again; 0 skipped")
    expect(page.locator("[data-task]")).to_have_count(0)
    for task_id in dead:
        assert client.get(f"/v1/tasks/{task_id}").json()["state"] == "queued"

    # Phone width: the same pages, one column.
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{gateway}/admin/queues")
    expect(mail.locator('[data-state="queued"] .n')).to_have_text("4")
    expect(mail.locator('[data-state="dead"] .n')).to_have_text("0")
    screenshot(page, "queues-phone")
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, f"the page is {width}px wide on a 390px screen"


def test_a_page_without_a_session_redirects_to_sign_in_and_back(page: Page, gateway: str) -> None:
    page.goto(f"{gateway}/admin/deadletters?queue=mail")
    expect(page).to_have_url(re.compile(r"/admin/login\?next=%2Fadmin%2Fdeadletters"))
    page.fill("input[name=api_key]", "not-a-key-at-all-012345")
    page.click("button[type=submit]")
    expect(page.locator(".error")).to_contain_text("Unknown API key")
    page.fill("input[name=api_key]", ADMIN)
    page.click("button[type=submit]")
    page.wait_for_url(f"{gateway}/admin/deadletters?queue=mail")
    page.get_by_role("button", name="Sign out").click()
    expect(page).to_have_url(re.compile(r"/admin/login"))
    page.goto(f"{gateway}/admin/queues")
    expect(page).to_have_url(re.compile(r"/admin/login\?next="))


def test_a_form_posted_without_its_csrf_token_is_refused(
    page: Page, gateway: str, client: httpx.Client
) -> None:
    client.put("/v1/queues/mail", json={})
    sign_in(page, gateway)
    page.evaluate("document.querySelectorAll('input[name=csrf]').forEach(e => e.remove())")
    page.get_by_role("button", name="Pause").click()
    expect(page.locator(".error")).to_contain_text("CSRF")
    assert not paused(client, "mail")
    # a request from another origin's page would carry the cookie at most, not the token
    answer = page.request.post(f"{gateway}/admin/queues/mail/pause", form={"x": "1"})
    assert answer.status == 403
    assert not paused(client, "mail")


def test_a_read_only_key_sees_everything_and_can_change_nothing(
    page: Page, gateway: str, client: httpx.Client
) -> None:
    client.put("/v1/queues/mail", json={})
    task = client.post("/v1/queues/mail/tasks", json={"name": "send_mail"}).json()
    sign_in(page, gateway, READER)
    expect(page.locator(".readonly")).to_have_text("read-only")
    expect(page.locator('[data-queue="mail"] [data-state="queued"] .n')).to_have_text("1")
    expect(page.get_by_role("button", name="Pause")).to_have_count(0)
    page.goto(f"{gateway}/admin/tasks/{task['id']}")
    expect(page.locator('[data-state="queued"]')).to_be_visible()
    expect(page.get_by_role("button", name="Cancel")).to_have_count(0)
    token = page.get_attribute('meta[name="csrf-token"]', "content")
    for path in ("/admin/queues/mail/pause", f"/admin/tasks/{task['id']}/cancel"):
        answer = page.request.post(gateway + path, form={"csrf": token or ""})
        assert answer.status == 403, path
    assert not paused(client, "mail")
    assert client.get(f"/v1/tasks/{task['id']}").json()["state"] == "queued"
