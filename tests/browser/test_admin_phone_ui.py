"""Running, Jobs and Dead letters on a phone (390 px) and a laptop (1366 px), in headless
Chromium against a real gateway, real workers and a real Redis: on the phone each row is a
card, and what an operator reads or presses there is on the screen, inside its width, with
nothing to scroll sideways (neither the page nor the table)."""

from __future__ import annotations

from pathlib import Path

import httpx
from playwright.sync_api import Locator, Page, expect

from tests.e2e.conftest import Cluster

from .conftest import screenshot, sign_in
from .test_admin_ui import ECHO, SLOW, dead_letters, until
from .test_admin_views_ui import serve_e2e

PHONE = {"width": 390, "height": 844}
LAPTOP = {"width": 1366, "height": 768}
NIGHTLY = {"kind": "crontab", "minute": "0", "hour": "3", "timezone": "Europe/Berlin"}


def inside(page: Page, cells: list[Locator]) -> None:
    """Each cell is shown, within the viewport's width; neither the page nor a table scrolls
    sideways (a cell pushed out of its table's scroll box would be hidden yet 'visible')."""
    width = page.viewport_size["width"] if page.viewport_size else 0
    for cell in cells:
        expect(cell).to_be_visible()
        box = cell.bounding_box()
        assert box is not None, cell
        assert box["width"] > 0, (cell, box)
        assert box["x"] >= 0, (cell, box)
        assert box["x"] + box["width"] <= width, (cell, box)
    page_width = page.evaluate("document.documentElement.scrollWidth")
    assert page_width <= width, f"the page is {page_width}px wide on a {width}px screen"
    sideways = page.evaluate(
        "[...document.querySelectorAll('.table')].filter(t => t.scrollWidth > t.clientWidth).length"
    )
    assert sideways == 0, "a table scrolls sideways"


def test_running_jobs_and_dead_letters_show_what_matters_on_a_phone(
    page: Page, cluster: Cluster, gateway: str, client: httpx.Client, tmp_path: Path
) -> None:
    serve_e2e(cluster, client, tmp_path)  # its catalog names the job's task: served
    dead = dead_letters(cluster, client, tmp_path, 2)
    slow = client.post("/v1/queues/e2e/tasks", json={"name": SLOW, "payload": {"args": [60]}})
    slow_id = slow.json()["id"]
    job = client.post(
        "/v1/jobs",
        json={
            "title": "Nightly invoice reminders for every region",
            "task": {"queue": "e2e", "name": ECHO},
            "args": {"args": ["reminders sent"]},
            "schedule": NIGHTLY,
        },
    )
    assert job.status_code == 201, job.text
    assert client.post(f"/v1/jobs/{job.json()['id']}/runs", json={}).status_code == 201
    until(lambda: client.get(f"/v1/tasks/{slow_id}").json()["progress"] == 0.5, what="heartbeat")

    page.set_viewport_size(PHONE)
    sign_in(page, gateway, start="/admin/running")

    # Running: the task, its queue and name, how long, its progress and Cancel.
    row = page.locator(f'[data-task="{slow_id}"]')
    expect(row).to_contain_text("50 %")
    inside(
        page,
        [
            row.get_by_role("link", name=slow_id),
            row.locator('[data-label="Queue"]'),
            row.locator('[data-label="Name"]'),
            row.locator('[data-label="Running for"]'),
            row.locator("progress"),
            row.get_by_role("button", name="Cancel"),
        ],
    )
    screenshot(page, "running-phone")

    # Jobs: the job, its last and next run, Run now and Pause.
    page.goto(f"{gateway}/admin/jobs")
    row = page.locator("[data-job]")
    expect(row.locator('[data-field="last-run"]')).to_contain_text("success", timeout=20_000)
    inside(
        page,
        [
            row.get_by_role("link", name="Nightly invoice reminders for every region"),
            row.locator('[data-field="last-run"]'),
            row.locator('[data-label="Next run"]'),
            row.get_by_role("button", name="Run now"),
            row.get_by_role("button", name="Pause"),
        ],
    )
    screenshot(page, "jobs-phone")

    # Dead letters: the box to select it, the task, its queue and name, when, the error.
    page.goto(f"{gateway}/admin/deadletters")
    expect(page.locator("[data-task]")).to_have_count(len(dead))
    row = page.locator(f'[data-task="{dead[0]}"]')
    inside(
        page,
        [
            page.locator("input[data-select-all]"),
            row.locator("input[name=ids]"),
            row.get_by_role("link", name=dead[0]),
            row.locator('[data-label="Queue"]'),
            row.locator('[data-label="Name"]'),
            row.locator('[data-label="Died"]'),
            row.locator('[data-label="Last error"]'),
        ],
    )
    screenshot(page, "dead-letters-phone")

    # A laptop: the same pages as tables, every column shown.
    page.set_viewport_size(LAPTOP)
    for path, name, headings in (
        ("/admin/running", "running", ["Task", "Queue", "Name", "Progress", "Where", "Attempt"]),
        ("/admin/jobs", "jobs", ["Job", "Task", "Schedule", "Last run", "Next run", "Runs"]),
        ("/admin/deadletters", "dead-letters", ["Task", "Queue", "Name", "Owner", "Attempts"]),
    ):
        page.goto(gateway + path)
        inside(page, [page.locator("th", has_text=h).first for h in headings])
        screenshot(page, name)

    # Cancelled, the slow task frees its worker at once (else it holds the teardown 15 s).
    assert client.post(f"/v1/tasks/{slow_id}/cancel").status_code == 200
    until(lambda: client.get(f"/v1/tasks/{slow_id}").json()["state"] == "cancelled", what="cancel")
