"""A gateway SIGKILLed between claiming a job's firing (or recording a run now) and enqueuing its
task: another gateway enqueues it, so every fire time and every run now ends as exactly one
task, pushed once to a real worker, for each overlap policy.

The window is made reproducible with ``JOBGATE_TEST_PAUSE_AFTER_CLAIM_MS``: the victim logs the
run it claimed and waits there; the test reads that line and kills it. The survivor has claimed
(allow) or skipped (skip, queue_one) later firings, or made another run now, by the time it
resumes the victim's run (``JOBGATE_JOB_RESUME_AFTER`` after the claim).
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support import free_port

from .conftest import ADMIN, Cluster, pushes
from .test_jobs_e2e import ECHO, all_runs, until

pytestmark = pytest.mark.e2e

RESUME_AFTER = "4"  # seconds: the survivor makes a few firings (1 s apart) before it resumes
PAUSED = re.compile(r"test pause: run (\w+) of job (\w+) claimed")
FINISHED = {"success", "warning", "failure", "stopped"}


class Setup:
    """A survivor gateway with a worker, and a victim gateway that pauses after each claim."""

    def __init__(self, cluster: Cluster, tmp_path: Path) -> None:
        survivor = cluster.gateway(
            JOBGATE_JOBS_INTERVAL="0.05", JOBGATE_JOB_RESUME_AFTER=RESUME_AFTER
        )
        client = cluster.client(survivor)
        client.put_queue("e2e")
        port = free_port()
        endpoint = client.add_endpoint("e2e", f"http://127.0.0.1:{port}/", concurrency=8)
        self.pushes = tmp_path / "pushes.jsonl"
        cluster.worker(endpoint.secret, port, self.pushes)
        self.log = tmp_path / "victim.log"
        self.victim_url = cluster.gateway(
            log=self.log,
            JOBGATE_JOBS_INTERVAL="0.05",
            JOBGATE_JOB_RESUME_AFTER=RESUME_AFTER,
            JOBGATE_TEST_PAUSE_AFTER_CLAIM_MS="600000",
        )
        self.victim = cluster.procs[-1]
        self.api = cluster.api(0)  # the survivor

    def __enter__(self) -> Setup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.api.close()

    def kill_when_paused(self, job_id: str) -> str:
        """Wait until the victim has claimed a run of the job and waits before its enqueue;
        SIGKILL it there. Returns the run's id."""

        def paused() -> str | None:
            for found in PAUSED.finditer(self.log.read_text()):
                if found[2] == job_id:
                    return found[1]
            return None

        run_id: str = until(paused, 60, "the victim to claim a run")
        self.victim.kill()
        self.victim.wait()
        return run_id

    def run(self, job_id: str, run_id: str) -> dict[str, Any]:
        return dict(self.api.get(f"/v1/jobs/{job_id}/runs/{run_id}").json())

    def settled(self, job_id: str) -> list[dict[str, Any]]:
        """Every run of the job, once all have ended."""

        def ended() -> list[dict[str, Any]] | None:
            runs = all_runs(self.api, job_id)
            return runs if all(r["status"] in FINISHED for r in runs) else None

        return list(until(ended, 60, "every run to end"))

    def check_one_task_each(self, runs: list[dict[str, Any]]) -> None:
        """Every run succeeded, with its own task, which the worker got once."""
        assert [r["status"] for r in runs] == ["success"] * len(runs)
        received = Counter(p["id"] for p in pushes(self.pushes))
        assert received == Counter(r["task_id"] for r in runs)


def interval_job(api: httpx.Client, overlap: str) -> dict[str, Any]:
    start = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=2)
    job = api.post(
        "/v1/jobs",
        json={
            "title": f"every second, {overlap}",
            "task": {"queue": "e2e", "name": ECHO},
            "args": {"kwargs": {"value": overlap}},
            "schedule": {"kind": "interval", "seconds": 1, "start_at": start.isoformat()},
            "overlap": overlap,
        },
    )
    assert job.status_code == 201, job.text
    return dict(job.json())


@pytest.mark.timeout(240)
@pytest.mark.parametrize("overlap", ["allow", "skip", "queue_one"])
def test_a_firing_claimed_by_a_killed_gateway_ends_as_one_task(
    cluster: Cluster, tmp_path: Path, overlap: str
) -> None:
    with Setup(cluster, tmp_path) as s:
        fire_and_kill(s, overlap)


def fire_and_kill(s: Setup, overlap: str) -> None:
    job = interval_job(s.api, overlap)
    run_id = s.kill_when_paused(job["id"])
    killed = until(
        lambda: (r := s.run(job["id"], run_id))["status"] in FINISHED and r,
        60,
        "the killed gateway's run to end",
    )
    assert killed["status"] == "success", killed
    if overlap == "allow":  # a few more firings, claimed by the survivor alone
        until(lambda: len(all_runs(s.api, job["id"])) >= 10, 60, "ten runs")
    paused = s.api.patch(f"/v1/jobs/{job['id']}", json={"active": False})
    assert paused.status_code == 200, paused.text
    runs = s.settled(job["id"])
    s.check_one_task_each(runs)
    fired = Counter(datetime.fromisoformat(r["fire_time"]) for r in runs)
    assert set(fired.values()) == {1}  # no fire time made two runs
    if overlap == "allow":  # and none was lost: one run per second from the first
        first = min(fired)
        assert sorted(fired) == [first + timedelta(seconds=k) for k in range(len(fired))]
    else:  # the firings while the killed run was pending were skipped (or one held)
        assert s.api.get(f"/v1/jobs/{job['id']}").json()["skipped_count"] >= 1


@pytest.mark.timeout(240)
def test_a_run_now_on_a_killed_gateway_ends_as_one_task(cluster: Cluster, tmp_path: Path) -> None:
    with Setup(cluster, tmp_path) as s:
        run_now_and_kill(s)


def run_now_and_kill(s: Setup) -> None:
    created = s.api.post(
        "/v1/jobs",
        json={
            "title": "by hand",
            "task": {"queue": "e2e", "name": ECHO},
            "args": {"kwargs": {"value": "by hand"}},
        },
    )
    assert created.status_code == 201, created.text
    job = created.json()

    def run_now_on_the_victim() -> None:
        with contextlib.suppress(httpx.TransportError):  # it is killed before it answers
            httpx.post(
                f"{s.victim_url}/v1/jobs/{job['id']}/runs",
                json={"note": "on the victim"},
                headers={"authorization": f"Bearer {ADMIN}"},
                timeout=120,
            )

    asker = threading.Thread(target=run_now_on_the_victim, daemon=True)
    asker.start()
    run_id = s.kill_when_paused(job["id"])
    asker.join(30)
    # Another run now, on the survivor, before it resumes the victim's run.
    second = s.api.post(f"/v1/jobs/{job['id']}/runs", json={"note": "on the survivor"}).json()
    runs = s.settled(job["id"])
    assert {r["id"] for r in runs} == {run_id, second["id"]}
    s.check_one_task_each(runs)
