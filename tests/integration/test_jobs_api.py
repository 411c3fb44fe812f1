"""The jobs and runs API in-process against a real Redis: every route, validation, scopes."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from redis.asyncio import Redis

from gateway.jobs.definition import machine_zone
from gateway.settings import ApiKey, Settings
from sdk.wire import LAST_SUCCESSFUL_RUN
from sdk.wire.timezones import check_timezone
from tests.support import gateway_client

from .test_api import problem

ADMIN = "admin-key-0123456789"
READER = "reader-key-0123456789"
Q = "reports"

CRON = {"kind": "crontab", "minute": "0", "hour": "3", "timezone": "Europe/Berlin"}


@pytest.fixture
async def api(redis_url: str) -> AsyncIterator[httpx.AsyncClient]:
    settings = Settings(
        redis_url=redis_url,
        api_keys=[
            ApiKey(key=ADMIN, scopes=["admin"], name="alice"),
            ApiKey(key=READER, scopes=["read"], name="auditor"),
        ],
    )
    async with gateway_client(settings, ADMIN) as client:
        assert (await client.put(f"/v1/queues/{Q}", json={})).status_code == 201
        yield client


def job_body(**fields: Any) -> dict[str, Any]:
    return {"title": "Nightly report", "task": {"queue": Q, "name": "report"}, **fields}


async def create(api: httpx.AsyncClient, **fields: Any) -> dict[str, Any]:
    answer = await api.post("/v1/jobs", json=job_body(**fields))
    assert answer.status_code == 201, answer.text
    return dict(answer.json())


async def test_create_get_list_a_job(api: httpx.AsyncClient) -> None:
    job = await create(api, schedule=CRON, args={"since": LAST_SUCCESSFUL_RUN})
    assert job["overlap"] == "skip"
    assert job["active"] is True
    assert job["run_count"] == 0
    assert job["last_run"] is None
    next_run = datetime.fromisoformat(job["next_run"])
    assert (next_run.hour, next_run.minute) in ((1, 0), (2, 0))  # 03:00 Berlin, in UTC
    assert (await api.get(f"/v1/jobs/{job['id']}")).json() == job
    assert (await api.get(f"/v1/jobs/{job['id'].lower()}")).json()["id"] == job["id"]
    second = await create(api, title="Manual")
    page = (await api.get("/v1/jobs", params={"limit": 1})).json()
    assert [j["id"] for j in page["items"]] == [job["id"]]
    rest = (await api.get("/v1/jobs", params={"cursor": page["next_cursor"]})).json()
    assert [j["id"] for j in rest["items"]] == [second["id"]]
    assert rest["next_cursor"] is None


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (job_body(schedule={**CRON, "minute": "61"}), "schedule.minute"),
        (job_body(schedule={**CRON, "day_of_week": "9"}), "schedule.day_of_week"),
        (job_body(schedule={**CRON, "timezone": "Mars/Olympus"}), "schedule.timezone"),
        (job_body(schedule={"kind": "interval", "seconds": 0}), "schedule"),
        (job_body(schedule={"kind": "interval", "seconds": -1}), "schedule.seconds"),
        (job_body(schedule={**CRON, "hour": "x" * 101}), "schedule.hour"),
        (job_body(overlap="sometimes"), "overlap"),
        (job_body(title=""), "title"),
        (job_body(notify="ftp://x"), "notify"),
    ],
)
async def test_a_bad_job_is_refused_naming_the_field(
    api: httpx.AsyncClient, body: dict[str, Any], field: str
) -> None:
    found = problem(await api.post("/v1/jobs", json=body), 422)
    # One form: each field named by its path in the body (no union tag such as 'crontab').
    assert [e["field"] for e in found["errors"]] == [field], found
    assert (await api.get("/v1/jobs")).json()["items"] == []


async def test_a_job_on_an_unregistered_queue_is_refused(api: httpx.AsyncClient) -> None:
    body = job_body(task={"queue": "nope", "name": "report"})
    assert (
        "'nope' is not registered" in problem(await api.post("/v1/jobs", json=body), 404)["detail"]
    )
    assert (await api.get("/v1/jobs")).json()["items"] == []


async def test_replace_patch_clone_delete(api: httpx.AsyncClient) -> None:
    job = await create(api, schedule=CRON)
    replaced = await api.put(f"/v1/jobs/{job['id']}", json=job_body(title="Weekly"))
    assert replaced.status_code == 200
    assert replaced.json()["schedule"] is None
    assert replaced.json()["next_run"] is None
    assert replaced.json()["created_at"] == job["created_at"]
    patched = (await api.patch(f"/v1/jobs/{job['id']}", json={"schedule": CRON})).json()
    assert patched["title"] == "Weekly"
    assert patched["next_run"] == job["next_run"]
    paused = (await api.patch(f"/v1/jobs/{job['id']}", json={"active": False})).json()
    assert paused["next_run"] is None
    unchanged = await api.patch(f"/v1/jobs/{job['id']}", json={"title": None, "schedule": None})
    assert (unchanged.json()["title"], unchanged.json()["schedule"]) == ("Weekly", None)
    clone = await api.post(f"/v1/jobs/{job['id']}/clone")
    assert clone.status_code == 201
    assert clone.json()["title"] == "Weekly (copy)"
    assert clone.json()["active"] is False
    assert clone.json()["id"] != job["id"]
    assert (await api.delete(f"/v1/jobs/{job['id']}")).status_code == 204
    problem(await api.get(f"/v1/jobs/{job['id']}"), 404)
    problem(await api.delete(f"/v1/jobs/{job['id']}"), 404)
    problem(await api.put(f"/v1/jobs/{job['id']}", json=job_body()), 404)
    assert [j["id"] for j in (await api.get("/v1/jobs")).json()["items"]] == [clone.json()["id"]]


async def test_a_job_stored_with_localtime_by_an_older_gateway_is_readable(
    api: httpx.AsyncClient, redis_url: str
) -> None:
    """Gateways before the fixed zone list took ``localtime`` (the machine's tz database has it);
    this one refuses it on write, and read such a stored job as a 500. It reads as the zone
    ``localtime`` names on this machine, everywhere the job is read, and a save stores that."""
    job = await create(api, schedule=CRON)
    redis = Redis.from_url(redis_url, decode_responses=True)
    key = f"jg:{{job:{job['id']}}}:job"
    stored = json.loads(await redis.hget(key, "def"))
    stored["schedule"]["timezone"] = "localtime"
    await redis.hset(key, "def", json.dumps(stored))
    zone = machine_zone()
    got = await api.get(f"/v1/jobs/{job['id']}")
    assert got.status_code == 200, got.text
    assert got.json()["schedule"]["timezone"] == zone
    assert [j["schedule"]["timezone"] for j in (await api.get("/v1/jobs")).json()["items"]] == [
        zone
    ]
    preview = await api.get(f"/v1/jobs/{job['id']}/preview")
    assert (preview.status_code, preview.json()["timezone"]) == (200, zone)
    patched = await api.patch(f"/v1/jobs/{job['id']}", json={"title": "Renamed"})
    assert patched.status_code == 200, patched.text
    assert json.loads(await redis.hget(key, "def"))["schedule"]["timezone"] == zone
    await redis.aclose()


async def test_a_crontab_stored_with_inner_spaces_by_an_older_gateway_is_readable(
    api: httpx.AsyncClient, redis_url: str
) -> None:
    """Gateways before the crontab fields' patterns took ``mon - fri`` (the day of the week's
    spaces were stripped); the patterns refuse it on write, so a stored one would fail every
    read. It reads as ``mon-fri``, and a save stores that."""
    job = await create(api, schedule=CRON)
    redis = Redis.from_url(redis_url, decode_responses=True)
    key = f"jg:{{job:{job['id']}}}:job"
    stored = json.loads(await redis.hget(key, "def"))
    stored["schedule"].update(day_of_week="mon - fri", hour="8 - 18 / 2")
    await redis.hset(key, "def", json.dumps(stored))
    got = await api.get(f"/v1/jobs/{job['id']}")
    assert got.status_code == 200, got.text
    schedule = got.json()["schedule"]
    assert (schedule["day_of_week"], schedule["hour"]) == ("mon-fri", "8-18/2")
    assert (await api.get(f"/v1/jobs/{job['id']}/preview")).status_code == 200
    patched = await api.patch(f"/v1/jobs/{job['id']}", json={"title": "Renamed"})
    assert patched.status_code == 200, patched.text
    assert json.loads(await redis.hget(key, "def"))["schedule"]["day_of_week"] == "mon-fri"
    await redis.aclose()


def test_the_machine_zone_is_the_one_localtime_links_to(tmp_path: Path) -> None:
    zoneinfo_dir = tmp_path / "zoneinfo"
    (zoneinfo_dir / "Europe").mkdir(parents=True)
    (zoneinfo_dir / "Europe" / "Berlin").write_bytes(b"TZif")
    (zoneinfo_dir / "localtime").symlink_to(zoneinfo_dir / "Europe" / "Berlin")
    assert machine_zone((str(tmp_path / "nowhere"), str(zoneinfo_dir))) == "Europe/Berlin"
    (zoneinfo_dir / "localtime").unlink()
    assert machine_zone((str(zoneinfo_dir),)) == "UTC"  # no link: UTC, a fixed zone
    assert check_timezone(machine_zone()) == machine_zone()  # this machine's: an accepted name


async def test_preview_lists_the_next_fire_times(api: httpx.AsyncClient) -> None:
    job = await create(api, schedule=CRON)
    preview = (await api.get(f"/v1/jobs/{job['id']}/preview", params={"count": 3})).json()
    assert preview["timezone"] == "Europe/Berlin"
    assert len(preview["items"]) == 3
    assert preview["items"][0] == job["next_run"]
    problem(await api.get(f"/v1/jobs/{job['id']}/preview", params={"count": 0}), 422)
    manual = await create(api)
    assert (await api.get(f"/v1/jobs/{manual['id']}/preview")).json()["items"] == []


async def test_run_now_stop_restart_delete_and_logs(api: httpx.AsyncClient) -> None:
    job = await create(api, args={"since": LAST_SUCCESSFUL_RUN, "n": 1})
    answer = await api.post(
        f"/v1/jobs/{job['id']}/runs", json={"title": "by hand", "note": "checking"}
    )
    assert answer.status_code == 201, answer.text
    run = answer.json()
    assert run["status"] == "pending"
    assert run["started_by"] == "alice"
    assert run["args"] == {"since": None, "n": 1}
    assert (run["title"], run["note"], run["queue"]) == ("by hand", "checking", Q)
    task = (await api.get(f"/v1/tasks/{run['task_id']}")).json()
    assert (task["name"], task["payload"], task["state"]) == ("report", run["args"], "queued")

    problem(await api.delete(f"/v1/jobs/{job['id']}/runs/{run['id']}"), 409)
    stopped = (await api.post(f"/v1/jobs/{job['id']}/runs/{run['id']}/stop")).json()
    assert stopped["status"] == "stopped"
    problem(await api.post(f"/v1/jobs/{job['id']}/runs/{run['id']}/stop"), 409)

    again = await api.post(f"/v1/jobs/{job['id']}/runs/{run['id']}/restart")
    assert again.status_code == 201
    assert again.json()["args"] == run["args"]
    assert again.json()["note"] == f"restart of run {run['id']}"
    assert again.json()["id"] != run["id"]

    later = await api.post(
        f"/v1/jobs/{job['id']}/runs",
        json={"args": [1, 2], "start_at": "2099-01-01T00:00:00Z"},
    )
    assert later.json()["args"] == [1, 2]
    assert (await api.get(f"/v1/tasks/{later.json()['task_id']}")).json()["state"] == "scheduled"

    runs = (await api.get(f"/v1/jobs/{job['id']}/runs")).json()["items"]
    assert [r["id"] for r in runs] == [later.json()["id"], again.json()["id"], run["id"]]
    only = await api.get(f"/v1/jobs/{job['id']}/runs", params={"status": "stopped"})
    assert [r["id"] for r in only.json()["items"]] == [run["id"]]
    paged = (await api.get(f"/v1/jobs/{job['id']}/runs", params={"limit": 2})).json()
    assert len(paged["items"]) == 2
    assert paged["next_cursor"] is not None

    logs = await api.get(f"/v1/jobs/{job['id']}/runs/{run['id']}/logs")
    assert logs.json()["items"] == []
    got = (await api.get(f"/v1/jobs/{job['id']}/runs/{run['id']}")).json()
    assert got["status"] == "stopped"
    assert (await api.delete(f"/v1/jobs/{job['id']}/runs/{run['id']}")).status_code == 204
    problem(await api.get(f"/v1/jobs/{job['id']}/runs/{run['id']}"), 404)
    assert (await api.get(f"/v1/jobs/{job['id']}")).json()["run_count"] == 3
    assert (await api.get(f"/v1/jobs/{job['id']}")).json()["last_run"]["id"] == later.json()["id"]


async def test_run_now_checks_the_queue_override(api: httpx.AsyncClient) -> None:
    job = await create(api)
    found = problem(await api.post(f"/v1/jobs/{job['id']}/runs", json={"queue": "nope"}), 404)
    assert "'nope' is not registered" in found["detail"]
    problem(await api.post("/v1/jobs/01JX0000000000000000000000/runs", json={}), 404)


async def test_a_read_only_key_reads_but_changes_nothing(api: httpx.AsyncClient) -> None:
    job = await create(api)
    run = (await api.post(f"/v1/jobs/{job['id']}/runs", json={})).json()
    reader = {"authorization": f"Bearer {READER}"}
    assert (await api.get("/v1/jobs", headers=reader)).status_code == 200
    assert (await api.get(f"/v1/jobs/{job['id']}/runs", headers=reader)).status_code == 200
    for method, path in [
        ("POST", "/v1/jobs"),
        ("PATCH", f"/v1/jobs/{job['id']}"),
        ("DELETE", f"/v1/jobs/{job['id']}"),
        ("POST", f"/v1/jobs/{job['id']}/clone"),
        ("POST", f"/v1/jobs/{job['id']}/runs"),
        ("POST", f"/v1/jobs/{job['id']}/runs/{run['id']}/stop"),
        ("POST", f"/v1/jobs/{job['id']}/runs/{run['id']}/restart"),
        ("DELETE", f"/v1/jobs/{job['id']}/runs/{run['id']}"),
    ]:
        body = job_body() if method != "DELETE" else None
        problem(await api.request(method, path, json=body, headers=reader), 403)
    assert (await api.get(f"/v1/jobs/{job['id']}")).json()["run_count"] == 1


async def test_the_list_shows_each_jobs_own_last_run(api: httpx.AsyncClient) -> None:
    first, idle, second = await create(api), await create(api), await create(api)
    runs = {}
    for job in (first, second, first):
        runs[job["id"]] = (await api.post(f"/v1/jobs/{job['id']}/runs", json={})).json()["id"]
    listed = {j["id"]: j for j in (await api.get("/v1/jobs")).json()["items"]}
    assert listed[first["id"]]["last_run"]["id"] == runs[first["id"]]
    assert listed[second["id"]]["last_run"]["id"] == runs[second["id"]]
    assert listed[idle["id"]]["last_run"] is None
    assert [listed[j["id"]]["run_count"] for j in (first, idle, second)] == [2, 0, 1]


async def test_job_and_run_args_are_checked_against_the_task_catalog(
    api: httpx.AsyncClient,
) -> None:
    schema = {
        "type": "object",
        "properties": {"days": {"type": "integer"}},
        "required": ["days"],
    }
    # A public address literal (no DNS); the queue is paused, so nothing is ever pushed to it.
    assert (await api.put(f"/v1/queues/{Q}", json={"paused": True})).status_code == 200
    endpoint = {"url": "http://8.8.8.8/", "tasks": [{"name": "report", "schema": schema}]}
    answer = await api.post(f"/v1/queues/{Q}/endpoints", json=endpoint)
    assert answer.status_code == 201, answer.text
    refused = await api.post("/v1/jobs", json=job_body(args={"days": "seven"}))
    assert refused.status_code == 422, refused.text
    assert [e["field"] for e in refused.json()["errors"]] == ["args.days"]
    job = await create(api, args={"days": 7})
    assert job["served"] is True
    # A name no endpoint reported is refused, as an enqueue of it is, unless the queue accepts
    # such names; then the job is kept and shown as not served.
    misspelled = job_body(title="Other", task={"queue": Q, "name": "reprot"})
    refused = await api.post("/v1/jobs", json=misspelled)
    assert refused.status_code == 422, refused.text
    assert refused.json()["type"] == "tag:jobgate.dev,2026:problem/unknown-task-name"
    assert {e["field"]: e["reason"] for e in refused.json()["errors"]} == {
        "task.name": f"no endpoint of queue '{Q}' reported a task named 'reprot'; "
        "did you mean 'report'?"
    }
    accept = await api.patch(f"/v1/queues/{Q}", json={"unknown_tasks": "accept"})
    assert accept.status_code == 200, accept.text
    other = await create(api, title="Other", task={"queue": Q, "name": "reprot"})
    assert other["served"] is False
    refuse = await api.patch(f"/v1/queues/{Q}", json={"unknown_tasks": "refuse"})
    assert refuse.status_code == 200, refuse.text
    run_other = await api.post(f"/v1/jobs/{other['id']}/runs", json={})
    assert run_other.status_code == 422, run_other.text
    assert [e["field"] for e in run_other.json()["errors"]] == ["task.name"]
    run_now = await api.post(f"/v1/jobs/{job['id']}/runs", json={"args": {}})
    assert run_now.status_code == 422, run_now.text
    assert [e["field"] for e in run_now.json()["errors"]] == ["args.days"]  # required, missing
