"""Jobs end to end: three gateway processes on one Redis fire each fire time exactly once; runs
against a real SDK worker succeed, log, and stop."""

from __future__ import annotations

import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support import free_port

from .conftest import Cluster

pytestmark = pytest.mark.e2e

ECHO = "tests.e2e.worker_app.echo"
SLOW = "tests.e2e.worker_app.slow"
PARTIAL = "tests.e2e.worker_app.partial"


def until(check: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def all_runs(api: httpx.Client, job_id: str) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = []
    cursor = None
    while True:
        params = {"limit": 500, **({"cursor": cursor} if cursor else {})}
        page = api.get(f"/v1/jobs/{job_id}/runs", params=params).json()
        runs += page["items"]
        cursor = page["next_cursor"]
        if cursor is None:
            return runs


@pytest.mark.timeout(180)
def test_three_gateways_fire_a_job_every_second_exactly_once(cluster: Cluster) -> None:
    for _ in range(3):
        cluster.gateway(JOBGATE_JOBS_INTERVAL="0.05")
    with cluster.api(0) as api:
        fire_every_second(cluster, api)


def fire_every_second(cluster: Cluster, api: httpx.Client) -> None:
    assert api.put("/v1/queues/ticks", json={}).status_code == 201
    # Whole seconds, far enough ahead that every gateway is up before the first.
    start = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=3)
    job = api.post(
        "/v1/jobs",
        json={
            "title": "every second",
            "task": {"queue": "ticks", "name": "tick"},
            "schedule": {"kind": "interval", "seconds": 1, "start_at": start.isoformat()},
            "overlap": "allow",  # runs pile up (no worker): every firing must still run
        },
    ).json()
    window = [start + timedelta(seconds=k) for k in range(10)]

    def fired() -> set[datetime]:
        times = {datetime.fromisoformat(r["fire_time"]) for r in all_runs(api, job["id"])}
        return times if window[-1] in times else set()

    until(fired, timeout=60, what="the tenth fire time")
    # Stop it from any gateway: the edit takes effect on all of them.
    with cluster.api(2) as other:
        stopped = other.patch(f"/v1/jobs/{job['id']}", json={"active": False})
    paused_at = datetime.now(UTC)
    assert stopped.json()["next_run"] is None
    # Absence takes waiting: two more fire times' worth, on every gateway.
    time.sleep(2)
    runs = all_runs(api, job["id"])
    latest = max(datetime.fromisoformat(r["fire_time"]) for r in runs)
    assert latest <= paused_at + timedelta(seconds=0.5)  # at most one claimed as it was paused
    fire_times = Counter(datetime.fromisoformat(r["fire_time"]) for r in runs)
    in_window = {t: n for t, n in fire_times.items() if window[0] <= t <= window[-1]}
    assert in_window == dict.fromkeys(window, 1)  # none missing, none twice
    assert sum(fire_times.values()) == len(fire_times)  # no duplicates outside it either
    assert all(r["started_by"] == "system" for r in runs)
    tasks = {r["task_id"] for r in runs}
    assert len(tasks) == len(runs)
    for gateway in range(3):  # every gateway reads the same job
        with cluster.api(gateway) as each:
            assert each.get(f"/v1/jobs/{job['id']}").json()["run_count"] == len(runs)


@pytest.mark.timeout(120)
def test_runs_against_a_worker_succeed_log_and_stop(cluster: Cluster, tmp_path: Path) -> None:
    gateway = cluster.gateway()
    with cluster.api(0) as api:
        run_against_a_worker(cluster, api, gateway, tmp_path)


def run_against_a_worker(cluster: Cluster, api: httpx.Client, gateway: str, tmp_path: Path) -> None:
    client = cluster.client(gateway)
    client.put_queue("e2e")
    port = free_port()
    endpoint = client.add_endpoint("e2e", f"http://127.0.0.1:{port}/", concurrency=8)
    cluster.worker(endpoint.secret, port, tmp_path / "pushes.jsonl")

    echo = api.post(
        "/v1/jobs",
        json={
            "title": "echo",
            "task": {"queue": "e2e", "name": ECHO},
            "args": {"kwargs": {"value": "{{ last_successful_run }}"}},
        },
    ).json()
    first = api.post(f"/v1/jobs/{echo['id']}/runs", json={}).json()

    def status(job_id: str, run_id: str, wanted: str) -> dict[str, Any] | None:
        run = api.get(f"/v1/jobs/{job_id}/runs/{run_id}").json()
        return run if run["status"] == wanted else None

    done = until(lambda: status(echo["id"], first["id"], "success"), 30, "a successful run")
    assert done["started_at"] is not None
    assert done["ended_at"] is not None
    second = api.post(f"/v1/jobs/{echo['id']}/runs", json={}).json()
    assert second["args"] == {"kwargs": {"value": done["started_at"].replace("+00:00", "Z")}}
    assert api.get(f"/v1/tasks/{first['task_id']}").json()["result"] is None

    partial = api.post(
        "/v1/jobs",
        json={"title": "partial", "task": {"queue": "e2e", "name": PARTIAL}, "args": {"args": [3]}},
    ).json()
    warned = api.post(f"/v1/jobs/{partial['id']}/runs", json={}).json()
    found = until(lambda: status(partial["id"], warned["id"], "warning"), 30, "a warning run")
    assert found["message"] == "3 rows skipped: ünïcode"
    task = api.get(f"/v1/tasks/{warned['task_id']}").json()
    assert (task["state"], task["warning"], task["result"]) == (
        "succeeded",
        "3 rows skipped: ünïcode",
        {"rows": 3},
    )

    slow = api.post(
        "/v1/jobs",
        json={
            "title": "slow",
            "task": {"queue": "e2e", "name": SLOW},
            "args": {"kwargs": {"seconds": 60}},
        },
    ).json()
    run = api.post(f"/v1/jobs/{slow['id']}/runs", json={}).json()
    until(lambda: status(slow["id"], run["id"], "running"), 30, "a running run")

    def logged() -> list[dict[str, Any]]:
        return list(api.get(f"/v1/jobs/{slow['id']}/runs/{run['id']}/logs").json()["items"])

    assert until(logged, 30, "a log line")[0]["message"] == "attempt 1 started"
    assert api.post(f"/v1/jobs/{slow['id']}/runs/{run['id']}/stop").status_code == 200
    stopped = until(lambda: status(slow["id"], run["id"], "stopped"), 30, "a stopped run")
    assert stopped["message"]
