"""A durable task's timeline on its admin page, in headless Chromium: a real gateway, a real SDK
worker process running a task with two steps and a durable sleep, a real Redis."""

from __future__ import annotations

from pathlib import Path

import httpx
from playwright.sync_api import Page, expect

from tests.e2e.conftest import Cluster
from tests.support import free_port

from .conftest import screenshot, sign_in
from .test_admin_ui import until

APP = "tests.e2e.durable_worker_app:app"
SLEEPER = "tests.e2e.durable_worker_app.sleeper"  # step "before", sleep "nap", step "after"
NAP = 5.0  # seconds: long enough to see the task asleep on its page
PHONE = {"width": 390, "height": 844}
ENTRIES = "[data-field=timeline] > li"


def kinds_and_labels(page: Page) -> list[str]:
    """The timeline's entries in page order, as ``kind:label``."""
    return page.locator(ENTRIES).evaluate_all(
        "els => els.map(e => e.dataset.kind + ':' + e.querySelector('.label').textContent)"
    )


def test_a_durable_tasks_page_shows_its_steps_sleep_and_attempts_in_order_live_and_on_a_phone(
    page: Page, cluster: Cluster, gateway: str, client: httpx.Client, tmp_path: Path
) -> None:
    assert client.put("/v1/queues/durable", json={"max_attempts": 1}).status_code == 201
    port = free_port()
    endpoint = client.post(
        "/v1/queues/durable/endpoints", json={"url": f"http://127.0.0.1:{port}/"}
    ).json()
    (tmp_path / "effects").mkdir()
    cluster.worker(endpoint["secret"], port, tmp_path / "pushes.jsonl", app=APP)
    payload = {"args": [str(tmp_path / "effects"), NAP]}
    task_id = client.post(
        "/v1/queues/durable/tasks", json={"name": SLEEPER, "payload": payload}
    ).json()["id"]
    until(
        lambda: client.get(f"/v1/tasks/{task_id}").json()["state"] == "scheduled",
        what="the task asleep",
    )

    # Asleep: the first attempt released, its step and the sleep, and what the task waits for.
    sign_in(page, gateway, start=f"/admin/tasks/{task_id}")
    asleep = [
        "created:enqueued",
        "attempt:attempt 1",
        "step:before",
        "sleep:nap",
        "now:scheduled",
    ]
    assert kinds_and_labels(page) == asleep
    entries = page.locator(ENTRIES)
    expect(entries.nth(1).locator(".badge")).to_have_text("released")
    expect(entries.nth(1)).to_contain_text("not spent")
    expect(entries.nth(1)).to_contain_text(f"127.0.0.1:{port}")
    expect(entries.nth(2)).to_contain_text("attempt 1")
    expect(entries.nth(3).locator(".badge")).to_have_text("sleeping")
    expect(entries.nth(3)).to_contain_text("sleeping until")
    expect(entries.nth(4)).to_contain_text("next push at")

    # The page refreshes live (htmx) until the task ends: the second attempt, its step, the end.
    done = [
        "created:enqueued",
        "attempt:attempt 1",
        "step:before",
        "sleep:nap",
        "attempt:attempt 1",  # the sleep spent no attempt
        "step:after",
        "finished:succeeded",
    ]
    until(lambda: kinds_and_labels(page) == done, timeout=NAP + 20, what="the finished timeline")
    expect(entries.nth(3).locator(".badge")).to_have_text("slept")
    expect(entries.nth(4).locator(".badge")).to_have_text("succeeded")
    expect(entries.nth(6)).to_contain_text('"attempt":1')
    screenshot(page, "task-timeline")

    # On a phone the timeline wraps: nothing in it (nor the page) scrolls sideways.
    page.set_viewport_size(PHONE)
    page.reload()
    assert kinds_and_labels(page) == done
    screenshot(page, "task-timeline-phone")
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= PHONE["width"], f"the page is {width}px wide on a 390px screen"
    timeline = page.locator("[data-field=timeline]")
    overflow = timeline.evaluate("e => e.scrollWidth - e.clientWidth")
    assert overflow <= 0, f"the timeline overflows by {overflow}px"
    box = timeline.bounding_box()
    assert box is not None
    assert box["x"] >= 0
    assert box["x"] + box["width"] <= PHONE["width"]
