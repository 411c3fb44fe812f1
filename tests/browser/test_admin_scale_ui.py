"""The admin UI at 1,000 queues (issue 21) in headless Chromium, against a real gateway process
and a real Redis: the queues table (paging, search, sort, live refresh), a queue picker's
suggestions, a filtered search over more tasks than one search looks at, finding by id, and a
read-only session.

The 1,000 queues are written straight to Redis in one pipeline (as ``PUT /v1/queues`` stores
them), not made by 1,000 API calls: the test is about reading them. The queue that holds tasks
is registered and filled through the API.
"""

from __future__ import annotations

import re

import httpx
from playwright.sync_api import Browser, Page, expect

from tests.e2e.conftest import Cluster
from tests.support import register_queues

from .conftest import READER, screenshot, sign_in

BUSY = "q0500"
SCANNED = 10_000  # entries one filtered search looks at (gateway.services.tasks.FILTER_SCAN)


def test_an_operator_pages_searches_sorts_and_filters_across_1000_queues(
    page: Page, browser: Browser, cluster: Cluster, gateway: str, client: httpx.Client
) -> None:
    register_queues(cluster.redis_url, [f"q{i:04d}" for i in range(1000)])
    assert client.put(f"/v1/queues/{BUSY}", json={}).status_code == 200
    # More tasks than one filtered search looks at; the one named "needle" lies past them.
    for start in range(0, SCANNED + 50, 1000):
        tasks = [
            {"name": "needle" if i == SCANNED + 20 else "hay"}
            for i in range(start, min(start + 1000, SCANNED + 50))
        ]
        created = client.post(f"/v1/queues/{BUSY}/tasks/batch", json={"tasks": tasks})
        assert created.status_code == 201, created.text
    sign_in(page, gateway)

    # A table of 50 rows a page, not 1,000 cards; the next page.
    rows = page.locator("tr[data-queue]")
    expect(rows).to_have_count(50)
    expect(page.locator('[data-field="shown"]')).to_contain_text("Queues 1 to 50 of 1,000")
    page.get_by_role("link", name="Next page").click()
    expect(rows.first).to_have_attribute("data-queue", "q0050")

    # Search by name: ten match.
    page.fill("input[name=q]", "q099")
    page.get_by_role("button", name="Search").click()
    expect(rows).to_have_count(10)
    expect(page.locator('[data-field="shown"]')).to_contain_text("(1,000 in all)")

    # Sort by queued tasks, most first; the live refresh keeps that view and its numbers move.
    page.goto(f"{gateway}/admin/queues")
    page.click('a[data-sort="queued"]')
    expect(rows.first).to_have_attribute("data-queue", BUSY)
    busy = page.locator(f'tr[data-queue="{BUSY}"] [data-state="queued"] .n')
    expect(busy).to_have_text(str(SCANNED + 50))
    page.evaluate("window.__sameDocument = true")
    client.post(f"/v1/queues/{BUSY}/tasks", json={"name": "hay"})
    expect(busy).to_have_text(str(SCANNED + 51), timeout=10_000)
    assert page.evaluate("window.__sameDocument") is True  # htmx swapped the rows, no reload
    expect(rows).to_have_count(50)
    screenshot(page, "queues-many")

    # The tasks page's queue picker suggests a few matching names, not 1,000 options.
    page.get_by_role("link", name="Tasks", exact=True).click()
    picker = page.locator("input[name=queue]")
    picker.fill("q050")
    options = page.locator("#queue-names option")
    expect(options).to_have_count(10)  # q0500 ... q0509
    expect(options.first).to_have_attribute("value", BUSY)
    picker.fill(BUSY)
    page.fill("input[name=name]", "needle")
    page.get_by_role("button", name="Filter").click()

    # The filtered search says how much it looked at, and goes on when asked.
    searched = page.locator('[data-field="searched"]')
    expect(searched).to_contain_text("Looked at queued tasks 1 to 10,000 of 10,051: 0 matching.")
    expect(page.locator("[data-task]")).to_have_count(0)
    screenshot(page, "tasks-searched")
    page.get_by_role("link", name=re.compile("Search on from task 10,001")).click()
    expect(page.locator("[data-task]")).to_have_count(1)
    expect(searched).to_contain_text("No more to look at.")
    needle = page.locator("[data-task]").get_attribute("data-task")
    assert needle is not None

    # Find by id from the header of any page: found, and not found.
    page.goto(f"{gateway}/admin/running")
    page.fill("header input[name=id]", needle.lower())
    page.press("header input[name=id]", "Enter")
    expect(page).to_have_url(f"{gateway}/admin/tasks/{needle}")
    page.fill("header input[name=id]", "01ARZ3NDEKTSV4RRFFQ69G5FAV")
    page.press("header input[name=id]", "Enter")
    expect(page.locator('[data-field="not-found"]')).to_contain_text("No task or run has the id")

    # A read-only session (on a phone) sees the same table and no button that changes anything.
    reader = browser.new_context(viewport={"width": 390, "height": 844})
    try:
        other = reader.new_page()
        sign_in(other, gateway, READER)
        expect(other.locator(".readonly")).to_have_text("read-only")
        expect(other.locator("tr[data-queue]")).to_have_count(50)
        expect(other.get_by_role("button", name="Pause")).to_have_count(0)
        expect(other.get_by_role("button", name="Resume")).to_have_count(0)
        width = other.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, f"the page is {width}px wide on a 390px screen"
        screenshot(other, "queues-many-phone")
    finally:
        reader.close()
