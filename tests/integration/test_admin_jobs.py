"""The admin UI's jobs pages in-process against a real Redis: the form built from the task
catalog, its errors, the list, a job's page, run now, stop, restart, delete, and scopes. (The
browser test in ``tests/browser`` drives them in Chromium against a real worker.)"""

from __future__ import annotations

import re
from typing import Any

from sdk import task
from sdk.catalog import describe
from tests.integration.test_admin import ADMIN, READER, Rig, csrf_of, rig, sign_in

__all__ = ["rig"]  # the fixture, shared with test_admin


@task(queue="mail")
def report(rows: int, label: str = "daily", *, verbose: bool = False) -> None:
    """Build the report."""


async def cataloged(rig: Rig) -> None:
    """An endpoint of 'mail' reporting the ``report`` task (nothing listens there)."""
    entry = describe(report).model_dump(mode="json", by_alias=True)
    answer = await rig.api.post(
        "/v1/queues/mail/endpoints", json={"url": "http://127.0.0.1:9/", "tasks": [entry]}
    )
    assert answer.status_code == 201, answer.text


def form(csrf: str, **fields: str) -> dict[str, str]:
    base = {
        "csrf": csrf,
        "title": "Nightly report",
        "description": "",
        "task": f"mail/{report.name}",
        "args_mode": "fields",
        "schedule": "crontab",
        "cron.minute": "0",
        "cron.hour": "3",
        "cron.day_of_month": "*",
        "cron.month_of_year": "*",
        "cron.day_of_week": "*",
        "timezone": "Europe/Berlin",
        "overlap": "skip",
        "notify": "",
        "active": "1",
    }
    return {**base, **fields}


async def new_job_page(rig: Rig) -> str:
    page = await rig.web.get("/admin/jobs/new")
    assert page.status_code == 200
    return page.text


async def test_the_job_form_is_built_from_the_catalog_schema_and_creates_the_job(rig: Rig) -> None:
    await cataloged(rig)
    await sign_in(rig.web, ADMIN)
    html = await new_job_page(rig)
    assert f'<option value="mail/{report.name}" selected>' in html
    assert re.search(r'<input type="number" name="arg.rows" value="" placeholder="">', html)
    assert re.search(r'name="arg.label" value="" placeholder="&#34;daily&#34;"', html)
    assert re.search(r'<select name="arg.verbose">', html)
    assert re.search(r'data-arg="rows">\s*<span>rows <span class="req"', html)
    assert re.search(r'data-arg="label">\s*<span>label <span class="muted"', html)

    made = await rig.web.post(
        "/admin/jobs/new", data=form(csrf_of(html), **{"arg.rows": "5", "arg.verbose": "true"})
    )
    assert made.status_code == 303
    job_id = made.headers["location"].split("/jobs/")[1].split("?")[0]
    job = (await rig.api.get(f"/v1/jobs/{job_id}")).json()
    assert job["args"] == {"kwargs": {"rows": 5, "verbose": True}}
    assert job["schedule"]["timezone"] == "Europe/Berlin"
    assert job["schedule"]["hour"] == "3"
    assert job["served"] is True

    page = await rig.web.get(made.headers["location"])
    assert "Job created." in page.text
    assert "cron 0 3 * * * (Europe/Berlin)" in page.text
    preview = page.text.split('data-field="preview">')[1].split("</dd>")[0]
    # the next five fire times in the job's zone, UTC on hover
    zoned = r'<span class="zoned" title="[^"]+ UTC">[^<]+ CES?T</span>'
    assert len(re.findall(zoned, preview)) == 5


async def test_a_form_with_bad_values_is_shown_again_with_the_fields_named(rig: Rig) -> None:
    await cataloged(rig)
    await sign_in(rig.web, ADMIN)
    csrf = csrf_of(await new_job_page(rig))

    typed = await rig.web.post("/admin/jobs/new", data=form(csrf, **{"arg.rows": "many"}))
    assert typed.status_code == 422
    assert "args.kwargs.rows: must be a whole number" in typed.text
    assert 'value="many"' in typed.text  # what was typed is kept

    missing = await rig.web.post("/admin/jobs/new", data=form(csrf, **{"arg.label": "x"}))
    assert missing.status_code == 422
    assert 'data-problem="args' in missing.text
    assert "rows" in missing.text

    cron = await rig.web.post(
        "/admin/jobs/new", data=form(csrf, **{"arg.rows": "1", "cron.hour": "25"})
    )
    assert cron.status_code == 422
    assert 'data-problem="schedule.hour"' in cron.text

    zone = await rig.web.post(
        "/admin/jobs/new", data=form(csrf, **{"arg.rows": "1", "timezone": "Mars/Olympus"})
    )
    assert zone.status_code == 422
    assert "IANA timezone" in zone.text
    assert (await rig.api.get("/v1/jobs")).json()["items"] == []


async def test_args_switch_between_fields_and_json_keeping_the_values(rig: Rig) -> None:
    await cataloged(rig)
    await sign_in(rig.web, ADMIN)
    name = f"mail/{report.name}"
    as_json = await rig.web.get(
        "/admin/jobs/args",
        params={"task": name, "mode": "json", "args_mode": "fields", "arg.rows": "7"},
    )
    assert as_json.status_code == 200
    assert "&#34;rows&#34;: 7" in as_json.text
    assert 'name="args_json"' in as_json.text
    back = await rig.web.get(
        "/admin/jobs/args",
        params={
            "task": name,
            "mode": "fields",
            "args_mode": "json",
            "args_json": '{"kwargs": {"rows": 9}}',
        },
    )
    assert re.search(r'name="arg.rows" value="9"', back.text)
    unknown = await rig.web.get("/admin/jobs/args", params={"task": "mail/nobody"})
    assert 'name="args_json"' in unknown.text  # no schema: a JSON box


async def job_via_api(rig: Rig, **fields: Any) -> dict[str, Any]:
    body = {"title": "Cleanup", "task": {"queue": "mail", "name": "cleanup"}, **fields}
    answer = await rig.api.post("/v1/jobs", json=body)
    assert answer.status_code == 201, answer.text
    return dict(answer.json())


async def test_edit_shows_the_job_and_saves_a_new_schedule(rig: Rig) -> None:
    job = await job_via_api(
        rig, args={"days": 30}, schedule={"kind": "interval", "hours": 2}, overlap="allow"
    )
    await sign_in(rig.web, ADMIN)
    page = await rig.web.get(f"/admin/jobs/{job['id']}/edit")
    assert 'value="Cleanup"' in page.text
    assert re.search(r'name="interval.hours" value="2"', page.text)
    assert '<option value="allow" selected>' in page.text
    assert "&#34;days&#34;: 30" in page.text  # no catalog schema: args as JSON
    fields = form(
        csrf_of(page.text),
        title="Cleanup v2",
        task="mail/cleanup",
        args_mode="json",
        args_json='{"days": 7}',
        schedule="interval",
        **{"interval.minutes": "15"},
    )
    saved = await rig.web.post(f"/admin/jobs/{job['id']}/edit", data=fields)
    assert saved.status_code == 303
    after = (await rig.api.get(f"/v1/jobs/{job['id']}")).json()
    assert after["title"] == "Cleanup v2"
    assert after["args"] == {"days": 7}
    assert after["schedule"]["minutes"] == 15
    assert after["schedule"]["hours"] == 0


async def test_list_pause_resume_clone_delete(rig: Rig) -> None:
    job = await job_via_api(rig, schedule={"kind": "interval", "hours": 1})
    await sign_in(rig.web, ADMIN)
    listing = await rig.web.get("/admin/jobs")
    row = listing.text.split(f'data-job="{job["id"]}"')[1].split("</tr>")[0]
    assert "never" in row
    assert "in 59 min" in row
    assert "every 1 h" in row
    csrf = csrf_of(listing.text)

    await rig.web.post(f"/admin/jobs/{job['id']}/pause", data={"csrf": csrf, "back": "list"})
    assert (await rig.api.get(f"/v1/jobs/{job['id']}")).json()["active"] is False
    await rig.web.post(f"/admin/jobs/{job['id']}/resume", data={"csrf": csrf})
    assert (await rig.api.get(f"/v1/jobs/{job['id']}")).json()["active"] is True

    cloned = await rig.web.post(f"/admin/jobs/{job['id']}/clone", data={"csrf": csrf})
    copy_id = cloned.headers["location"].split("/jobs/")[1].split("?")[0]
    copy = (await rig.api.get(f"/v1/jobs/{copy_id}")).json()
    assert copy["title"] == "Cleanup (copy)"
    assert copy["active"] is False

    gone = await rig.web.post(f"/admin/jobs/{copy_id}/delete", data={"csrf": csrf})
    assert gone.headers["location"].endswith("/admin/jobs?notice=job-deleted")
    assert (await rig.api.get(f"/v1/jobs/{copy_id}")).status_code == 404


async def test_run_now_stop_restart_and_delete_a_run(rig: Rig) -> None:
    job = await job_via_api(rig, args={"days": 1})
    await sign_in(rig.web, ADMIN)
    csrf = csrf_of((await rig.web.get(f"/admin/jobs/{job['id']}")).text)

    started = await rig.web.post(f"/admin/jobs/{job['id']}/run", data={"csrf": csrf})
    assert started.status_code == 303
    run_url = started.headers["location"].split("?")[0]
    run_id = run_url.rsplit("/", 1)[1]
    run_page = await rig.web.get(run_url)
    assert 'data-status="pending"' in run_page.text
    assert ">ops<" in run_page.text
    assert 'hx-trigger="every 1s"' in run_page.text  # live until it ends

    stopped = await rig.web.post(f"{run_url}/stop", data={"csrf": csrf})
    assert stopped.status_code == 303
    run_page = await rig.web.get(run_url)
    assert 'data-status="stopped"' in run_page.text
    assert "hx-trigger" not in run_page.text

    restarted = await rig.web.post(f"{run_url}/restart", data={"csrf": csrf})
    new_id = restarted.headers["location"].split("/runs/")[1].split("?")[0]
    assert new_id != run_id
    runs = (await rig.api.get(f"/v1/jobs/{job['id']}/runs")).json()["items"]
    assert {r["id"] for r in runs} == {run_id, new_id}

    refused = await rig.web.post(
        f"/admin/jobs/{job['id']}/runs/{new_id}/delete", data={"csrf": csrf}
    )
    assert refused.status_code == 409
    assert "stop it first" in refused.text
    await rig.web.post(f"{run_url}/delete", data={"csrf": csrf})
    runs = (await rig.api.get(f"/v1/jobs/{job['id']}/runs")).json()["items"]
    assert [r["id"] for r in runs] == [new_id]

    job_page = await rig.web.get(f"/admin/jobs/{job['id']}", params={"status": "pending"})
    assert f'data-run="{new_id}"' in job_page.text
    stopped_only = await rig.web.get(f"/admin/jobs/{job['id']}", params={"status": "stopped"})
    assert "data-run=" not in stopped_only.text


async def test_run_with_other_args_queue_and_note(rig: Rig) -> None:
    await rig.api.put("/v1/queues/other", json={})
    job = await job_via_api(rig, args={"days": 1})
    await sign_in(rig.web, ADMIN)
    page = await rig.web.get(f"/admin/jobs/{job['id']}/runs/new")
    assert "&#34;days&#34;: 1" in page.text
    data = {
        "csrf": csrf_of(page.text),
        "task": "mail/cleanup",
        "args_mode": "json",
        "args_json": '{"days": 2}',
        "queue": "other",
        "title": "by hand",
        "note": "after the outage",
        "start_at": "2030-01-02T03:04:05",
    }
    started = await rig.web.post(f"/admin/jobs/{job['id']}/runs/new", data=data)
    assert started.status_code == 303, started.text
    run_id = started.headers["location"].split("/runs/")[1].split("?")[0]
    run = (await rig.api.get(f"/v1/jobs/{job['id']}/runs/{run_id}")).json()
    assert run["args"] == {"days": 2}
    assert run["queue"] == "other"
    assert run["title"] == "by hand"
    assert run["note"] == "after the outage"
    task = (await rig.api.get(f"/v1/tasks/{run['task_id']}")).json()
    assert task["run_at"].startswith("2030-01-02T03:04:05")

    bad = await rig.web.post(
        f"/admin/jobs/{job['id']}/runs/new", data={**data, "args_json": "{days: 2}"}
    )
    assert bad.status_code == 422
    assert "args: is not JSON" in bad.text


async def test_a_read_only_key_sees_jobs_and_runs_but_cannot_change_them(rig: Rig) -> None:
    job = await job_via_api(rig, args={"days": 1})
    run = (await rig.api.post(f"/v1/jobs/{job['id']}/runs", json={})).json()
    await sign_in(rig.web, READER)
    listing = await rig.web.get("/admin/jobs")
    assert "Cleanup" in listing.text
    assert "Run now" not in listing.text
    assert "New job" not in listing.text
    run_page = await rig.web.get(f"/admin/jobs/{job['id']}/runs/{run['id']}")
    assert run_page.status_code == 200
    assert ">Stop<" not in run_page.text
    csrf = csrf_of(listing.text)
    for path in (
        f"/admin/jobs/{job['id']}/run",
        f"/admin/jobs/{job['id']}/pause",
        f"/admin/jobs/{job['id']}/delete",
        f"/admin/jobs/{job['id']}/runs/{run['id']}/stop",
        "/admin/jobs/new",
    ):
        answer = await rig.web.post(path, data={"csrf": csrf})
        assert answer.status_code == 403, path
    assert (await rig.api.get(f"/v1/jobs/{job['id']}")).json()["active"] is True
    status = (await rig.api.get(f"/v1/jobs/{job['id']}/runs/{run['id']}")).json()["status"]
    assert status == "pending"


async def test_bad_ids_are_refused_without_an_error_500(rig: Rig) -> None:
    await sign_in(rig.web, ADMIN)
    for path in ("/admin/jobs/nope", "/admin/jobs/01J0000000000000000000000Z/runs/x"):
        answer = await rig.web.get(path)
        assert answer.status_code in (400, 404), path
    missing = await rig.web.get("/admin/jobs/01J00000000000000000000000")
    assert missing.status_code == 404
    assert "no job" in missing.text


async def test_the_runs_list_refreshes_alone_for_htmx(rig: Rig) -> None:
    job = await job_via_api(rig)
    await rig.api.post(f"/v1/jobs/{job['id']}/runs", json={})
    await sign_in(rig.web, ADMIN)
    part = await rig.web.get(f"/admin/jobs/{job['id']}", headers={"hx-request": "true"})
    assert part.text.startswith('<div id="runs"')
    assert "<html" not in part.text


async def test_a_job_form_posted_without_its_csrf_token_creates_nothing(rig: Rig) -> None:
    await cataloged(rig)
    await sign_in(rig.web, ADMIN)
    fields = form("", **{"arg.rows": "1"})
    del fields["csrf"]
    answer = await rig.web.post("/admin/jobs/new", data=fields)
    assert answer.status_code == 403
    assert "CSRF" in answer.text
    assert (await rig.api.get("/v1/jobs")).json()["items"] == []
