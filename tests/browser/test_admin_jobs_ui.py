"""The jobs pages in headless Chromium, against a real gateway, a real SDK worker process that
reported its tasks to the catalog, and a real Redis: create a job from the form the catalog
built, run it now, watch the run succeed live and read its log lines, stop a running run."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import httpx
from playwright.sync_api import Page, expect

from tests.e2e.conftest import ROOT, Cluster
from tests.support import free_port

from .conftest import READER, screenshot, sign_in

REPORT = "tests.e2e.worker_app.report"
SLOW = "tests.e2e.worker_app.slow"
CATALOG = (
    "import json; from tests.e2e.worker_app import worker; "
    "print(json.dumps([t.model_dump(mode='json', by_alias=True) for t in worker.catalog('e2e')]))"
)


def worker_with_catalog(cluster: Cluster, client: httpx.Client, tmp_path: Path) -> None:
    """The e2e SDK worker serving queue 'e2e', its endpoint reporting the worker's catalog
    (derived by the SDK from the task functions' type hints, in the worker's own module)."""
    assert client.put("/v1/queues/e2e", json={}).status_code == 201
    port = free_port()
    endpoint = client.post(
        "/v1/queues/e2e/endpoints", json={"url": f"http://127.0.0.1:{port}/"}
    ).json()
    cluster.worker(endpoint["secret"], port, tmp_path / "pushes.jsonl")
    derived = subprocess.run(
        [sys.executable, "-c", CATALOG],
        env={**os.environ, "JOBGATE_WORKER_SECRET": endpoint["secret"]},
        cwd=ROOT,
        capture_output=True,
        check=True,
        timeout=60,
    )
    tasks = json.loads(derived.stdout)
    reported = client.put(f"/v1/queues/e2e/endpoints/{endpoint['id']}/tasks", json={"tasks": tasks})
    assert reported.status_code == 200, reported.text


def test_operator_creates_a_job_from_the_catalog_form_runs_it_and_stops_a_run(
    page: Page, cluster: Cluster, gateway: str, client: httpx.Client, tmp_path: Path
) -> None:
    worker_with_catalog(cluster, client, tmp_path)
    sign_in(page, gateway)

    # A new job: the args fields come from the chosen task's schema.
    page.get_by_role("navigation", name="Sections").get_by_role("link", name="Jobs").click()
    expect(page.locator("#jobs")).to_contain_text("No jobs yet")
    page.get_by_role("link", name="New job").click()
    page.select_option("select[name=task]", f"e2e/{REPORT}")
    rows = page.locator('input[name="arg.rows"]')
    expect(rows).to_have_attribute("type", "number")
    expect(page.locator('[data-arg="rows"] .req')).to_be_visible()  # required: no default
    expect(page.locator('input[name="arg.label"]')).to_have_attribute("placeholder", '"daily"')
    page.fill("input[name=title]", "Nightly report")
    page.fill("textarea[name=description]", "Three rows, every night at three (Berlin).")
    rows.fill("3")
    page.fill('input[name="arg.label"]', "nightly")
    page.check("input[name=schedule][value=crontab]")
    page.fill('input[name="cron.hour"]', "3")
    page.fill("input[name=timezone]", "Europe/Berlin")
    screenshot(page, "job-form")
    page.get_by_role("button", name="Create job").click()
    expect(page.locator(".notice")).to_contain_text("Job created.")
    expect(page.locator('[data-field="args"]')).to_contain_text('"label": "nightly"')
    # the next fire times in the job's zone, UTC on hover (issue 31)
    first = page.locator('[data-field="preview"] .zoned').first
    expect(first).to_have_text(re.compile(r"03:00:00 CES?T$"))
    expect(first).to_have_attribute("title", re.compile(r" UTC$"))

    # Run it now: the run's page turns success live, and shows the task's log lines.
    page.evaluate("window.__sameDocument = true")
    page.get_by_role("button", name="Run now").click()
    expect(page.locator(".notice")).to_contain_text("Run started.")
    page.evaluate("window.__sameDocument = true")
    expect(page.locator('#run [data-status="success"]')).to_be_visible(timeout=20_000)
    assert page.evaluate("window.__sameDocument") is True  # htmx refreshed it, no reload
    logs = page.locator('[data-field="logs"]')
    expect(logs).to_contain_text("nightly: row 1 of 3")
    expect(logs).to_contain_text("nightly: row 3 of 3")
    expect(page.locator("#run")).to_contain_text("ops")  # started by the signed-in key
    screenshot(page, "run")

    # The list shows its last run (status, time, by whom) and its next run.
    page.get_by_role("navigation", name="Sections").get_by_role("link", name="Jobs").click()
    row = page.locator("[data-job]").filter(has_text="Nightly report")
    expect(row.locator('[data-field="last-run"]')).to_contain_text("success")
    expect(row.locator('[data-field="last-run"]')).to_contain_text("by ops")
    expect(row).to_contain_text("cron 0 3 * * * (Europe/Berlin)")

    # A long run, stopped from its page while it runs: it ends as stopped.
    job = client.post(
        "/v1/jobs",
        json={
            "title": "Long import",
            "task": {"queue": "e2e", "name": SLOW},
            "args": {"kwargs": {"seconds": 60}},
        },
    ).json()
    page.reload()
    page.get_by_role("link", name="Long import").click()
    page.get_by_role("button", name="Run now").click()
    expect(page.locator('#run [data-status="running"]')).to_be_visible(timeout=20_000)
    expect(page.locator('[data-field="logs"]')).to_contain_text("attempt 1 started")
    page.get_by_role("button", name="Stop").click()
    expect(page.locator(".notice")).to_contain_text("Stop requested")
    expect(page.locator('#run [data-status="stopped"]')).to_be_visible(timeout=20_000)
    runs = client.get(f"/v1/jobs/{job['id']}/runs").json()["items"]
    assert [r["status"] for r in runs] == ["stopped"]

    # The job's page lists both kinds of runs; the first job's run shows in its runs table.
    page.get_by_role("link", name="Long import: runs").click()
    expect(page.locator('[data-run] [data-status="stopped"]')).to_have_count(1)
    screenshot(page, "job")

    # Phone width: the jobs list fits.
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{gateway}/admin/jobs")
    expect(page.locator("[data-job]")).to_have_count(2)
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, f"the page is {width}px wide on a 390px screen"


def test_a_read_only_key_gets_no_job_or_run_form(
    page: Page, gateway: str, client: httpx.Client
) -> None:
    assert client.put("/v1/queues/mail", json={}).status_code == 201
    body = {"title": "Cleanup", "task": {"queue": "mail", "name": "cleanup"}}
    job = client.post("/v1/jobs", json=body).json()
    sign_in(page, gateway, READER, "/admin/jobs")
    for path in (
        "/admin/jobs/new",
        f"/admin/jobs/{job['id']}/edit",
        f"/admin/jobs/{job['id']}/runs/new",
    ):
        page.goto(gateway + path)
        expect(page.locator("[data-readonly]")).to_contain_text("read-only")
        expect(page.locator("main form")).to_have_count(0)
        expect(page.locator("main button")).to_have_count(0)
        expect(page.locator("main input, main select, main textarea")).to_have_count(0)
