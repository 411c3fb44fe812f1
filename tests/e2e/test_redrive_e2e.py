"""Automatic redrive with real processes: a worker has an outage (answers 500), the tasks pushed
meanwhile go dead, and once it is back the queue's redrive policy heals them with no operator."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from tests.e2e.conftest import Cluster
from tests.support import free_port


def _tasks(api: Any, ids: list[str]) -> list[dict[str, Any]]:
    return [api.get(f"/v1/tasks/{task_id}").json() for task_id in ids]


def _wait_all(api: Any, ids: list[str], state: str, timeout: float) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while True:
        tasks = _tasks(api, ids)
        if all(t["state"] == state for t in tasks):
            return tasks
        if time.monotonic() > deadline:
            raise AssertionError(f"not all {state}: {[t['state'] for t in tasks]}")
        time.sleep(0.1)


def test_dead_tasks_of_an_outage_heal_by_redrive_without_an_operator(
    cluster: Cluster, tmp_path: Path
) -> None:
    gateway = cluster.gateway(JOBGATE_REDRIVE_INTERVAL="0.2")
    broken = tmp_path / "broken"
    broken.touch()
    port = free_port()
    cluster.worker(
        "", port, tmp_path / "log", app="tests.e2e.flaky_app:app", E2E_BROKEN=str(broken)
    )
    with cluster.api() as api:
        policy = {
            "max_attempts": 2,
            "backoff": {"strategy": "constant", "base_delay": 0.05},
            "redrive": {"on": ["5xx"], "after": 1, "every": 10},
            "circuit_breaker": {"failures": 1000},  # every push goes to the worker
        }
        assert api.put("/v1/queues/flaky", json=policy).status_code == 201
        r = api.post("/v1/queues/flaky/endpoints", json={"url": f"http://127.0.0.1:{port}/"})
        assert r.status_code == 201, r.text
        ids = [
            api.post("/v1/queues/flaky/tasks", json={"name": "sync", "payload": i}).json()["id"]
            for i in range(5)
        ]
        dead = _wait_all(api, ids, "dead", timeout=20)
        assert all(t["attempts"][-1]["failure"] == "5xx" for t in dead)

        broken.unlink()  # the outage ends; nobody resubmits anything
        healed = _wait_all(api, ids, "succeeded", timeout=30)

    assert gateway
    for task in healed:
        assert task["redrives"] == 1
        assert task["result"] == {"ok": True}
        steps = [(a["outcome"], a["failure"]) for a in task["attempts"]]
        assert steps == [
            ("error", "5xx"),
            ("error", "5xx"),
            ("redriven", "5xx"),
            ("succeeded", None),
        ]
        assert task["attempts"][2]["error"] == (
            "redriven automatically after a 5xx failure (redrive 1 of 3)"
        )
