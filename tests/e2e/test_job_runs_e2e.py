"""Run history outlives the tasks: every run keeps how it ended once its task is swept, for
every overlap policy and for runs now, whichever gateway (or recoverer) ends the task.

The runs are read only once their tasks are gone: reading a run while its task exists is not
what may keep its end (the end is recorded with the task's end, by the script that ends it)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support import free_port

from .conftest import Cluster, pushes
from .test_e2e import until

pytestmark = pytest.mark.e2e

ECHO = "tests.e2e.worker_app.echo"
RUNS = 5
SWEEP = "0.2"  # seconds between sweeps of a queue (60 by default)


def all_runs(api: httpx.Client, job_id: str) -> list[dict[str, Any]]:
    page = api.get(f"/v1/jobs/{job_id}/runs", params={"limit": 500}).json()
    assert page["next_cursor"] is None
    return list(page["items"])


def swept(api: httpx.Client, queue: str) -> bool:
    """Whether the queue holds no task at all (every finished one swept)."""
    counts = api.get(f"/v1/queues/{queue}").json()["counts"]
    return not any(counts.values())


def ended_whole(run: dict[str, Any], status: str) -> bool:
    return (
        run["status"] == status
        and run["started_at"] is not None
        and run["ended_at"] is not None
        and run["attempts"] == 1
    )


@pytest.mark.timeout(180)
def test_every_overlap_policy_and_run_now_keep_each_end(cluster: Cluster, tmp_path: Path) -> None:
    gateway = cluster.gateway(JOBGATE_SWEEP_INTERVAL=SWEEP)
    client = cluster.client(gateway)
    # Retention 3 s: long enough that a queue_one firing held behind the last run is released
    # (re-checked every second) before that run's task is swept.
    client.put_queue("e2e", retention_succeeded=3)
    port = free_port()
    endpoint = client.add_endpoint("e2e", f"http://127.0.0.1:{port}/", concurrency=8)
    log = tmp_path / "pushes.jsonl"
    cluster.worker(endpoint.secret, port, log)
    with cluster.api(0) as api:
        start = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=2)
        jobs = {
            overlap: api.post(
                "/v1/jobs",
                json={
                    "title": f"every second, {overlap}",
                    "task": {"queue": "e2e", "name": ECHO},
                    "args": {"kwargs": {"value": overlap}},
                    "schedule": {"kind": "interval", "seconds": 1, "start_at": start.isoformat()},
                    "overlap": overlap,
                },
            ).json()["id"]
            for overlap in ("allow", "skip", "queue_one")
        }
        manual = api.post(
            "/v1/jobs",
            json={
                "title": "by hand",
                "task": {"queue": "e2e", "name": ECHO},
                "args": {"args": [1]},
            },
        ).json()["id"]
        made = [api.post(f"/v1/jobs/{manual}/runs", json={}).json()["id"] for _ in range(RUNS)]
        # Wait on the worker's pushes, not on the jobs: reading a job reads its newest run.
        wanted = RUNS * (len(jobs) + 1)
        until(lambda: len(pushes(log)) >= wanted, 60, f"{wanted} pushes")
        for job_id in jobs.values():
            assert api.patch(f"/v1/jobs/{job_id}", json={"active": False}).status_code == 200

        def settled() -> bool:
            """Every task swept, after every job's newest run ended (a queue_one firing held
            behind the last run is released once that run ends, within a second or so: its
            task would make the queue not swept again)."""
            ended = all(
                (api.get(f"/v1/jobs/{job_id}").json()["last_run"] or {}).get("status")
                in ("success", "failure")
                for job_id in jobs.values()
            )
            return ended and swept(api, "e2e")

        until(settled, 60, "every task of the runs swept")

        found = {overlap: all_runs(api, job_id) for overlap, job_id in jobs.items()}
        found["run now"] = all_runs(api, manual)
        assert sorted(r["id"] for r in found["run now"]) == sorted(made)
        shown = {name: [(r["status"], r["attempts"]) for r in runs] for name, runs in found.items()}
        assert all(len(runs) >= 2 for runs in found.values()), shown  # (a loaded machine may
        # skip some firings: at least one run older than the newest is what counts)
        whole = {name: all(ended_whole(r, "success") for r in runs) for name, runs in found.items()}
        assert whole == dict.fromkeys(found, True), shown


@pytest.mark.timeout(180)
def test_runs_ended_by_another_gateway_and_the_recoverer(cluster: Cluster) -> None:
    """Runs made through one gateway, leased and ended through another (a result, a final
    error), cancelled while queued, and dead-lettered by a recoverer when the lease ran out."""
    first = cluster.gateway(JOBGATE_SWEEP_INTERVAL=SWEEP)
    cluster.gateway(JOBGATE_SWEEP_INTERVAL=SWEEP)
    client = cluster.client(first)
    lease = 4
    client.put_queue(
        "chaos",
        lease_timeout=lease,
        max_attempts=1,
        dead_letter=True,
        retention_succeeded=1,
        retention_failed=1,
    )
    endpoint = client.add_endpoint("chaos", pull=True, concurrency=8)
    with cluster.api(0) as api, cluster.api(1) as other:
        job = api.post(
            "/v1/jobs", json={"title": "pulled", "task": {"queue": "chaos", "name": "work"}}
        ).json()["id"]
        stopped, ok, failed, expired = (
            api.post(f"/v1/jobs/{job}/runs", json={"note": n}).json()["id"]
            for n in ("stopped", "ok", "failed", "expired")
        )
        assert api.post(f"/v1/jobs/{job}/runs/{stopped}/stop").status_code == 200
        leased = other.post(
            "/v1/queues/chaos/leases",
            json={"endpoint_id": endpoint.id, "max_tasks": 3, "wait": 10},
        ).json()["tasks"]
        tokens = {item["id"]: item["lease"] for item in leased}
        assert set(tokens) == {ok, failed, expired}

        def callback(run_id: str, kind: str, body: dict[str, Any]) -> None:
            answer = other.post(
                f"/v1/callbacks/chaos/{run_id}/{kind}",
                json=body,
                headers={"jobgate-lease": tokens[run_id]},
            )
            assert answer.status_code == 200, answer.text

        callback(ok, "result", {"result": {"done": True}})
        callback(failed, "error", {"error": "it broke", "retryable": False})
        # ``expired`` is left to its lease: a recoverer ends it, dead (one attempt allowed).
        until(lambda: swept(api, "chaos"), 60, "every task of the runs swept")

        runs = {r["id"]: r for r in all_runs(api, job)}
        assert set(runs) == {stopped, ok, failed, expired}
        assert ended_whole(runs[ok], "success"), str(runs[ok])
        assert ended_whole(runs[failed], "failure"), runs[failed]
        assert runs[failed]["message"] == "it broke"
        assert ended_whole(runs[expired], "failure"), runs[expired]
        assert "lease" in (runs[expired]["message"] or ""), runs[expired]
        assert runs[stopped]["status"] == "stopped"
        assert runs[stopped]["ended_at"] is not None
        assert runs[stopped]["attempts"] == 0
