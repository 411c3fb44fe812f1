"""Durable steps and sleep end to end (docs/durable.md): real gateway and worker processes, a
real Redis. Each step's runs are counted by the lines its function appends to a file."""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from sdk import Client, TaskState
from tests.support import free_port, traces

from .conftest import Cluster, pushes

pytestmark = pytest.mark.e2e

APP = "tests.e2e.durable_worker_app:app"
THREE = "tests.e2e.durable_worker_app.three_steps"
THREE_SYNC = "tests.e2e.durable_worker_app.three_steps_sync"
SLEEPER = "tests.e2e.durable_worker_app.sleeper"
RECOVER_INTERVAL = 0.05  # the e2e gateways' JOBGATE_RECOVER_INTERVAL (tests/e2e/conftest.py)


@dataclass
class Setup:
    client: Client
    worker: Any
    secret: str
    port: int
    log: Path
    folder: Path


def setup(cluster: Cluster, tmp_path: Path, concurrency: int = 10, **policy: Any) -> Setup:
    """A gateway, the ``durable`` queue with ``policy``, and a worker process serving it as an
    endpoint taking ``concurrency`` pushes at once."""
    client = cluster.client(cluster.gateway())
    client.put_queue("durable", **policy)
    port = free_port()
    endpoint = client.add_endpoint("durable", f"http://127.0.0.1:{port}/", concurrency=concurrency)
    log = tmp_path / "pushes.jsonl"
    folder = tmp_path / "effects"
    folder.mkdir()
    worker = cluster.worker(endpoint.secret, port, log, app=APP)
    return Setup(client, worker, endpoint.secret, port, log, folder)


def runs(folder: Path, name: str) -> int:
    path = folder / name
    return len(path.read_text().splitlines()) if path.exists() else 0


def until(check: Any, timeout: float = 30, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def test_steps_done_before_a_sigkill_run_once_across_attempts(
    cluster: Cluster, tmp_path: Path
) -> None:
    s = setup(cluster, tmp_path, lease_timeout=3.0, max_attempts=3)
    task = s.client.enqueue("durable", THREE, {"args": [str(s.folder)]})
    until(lambda: runs(s.folder, "three") == 1, what="the third step started")
    (first,) = pushes(s.log)
    s.client.patch_queue("durable", paused=True)  # attempt 2 waits for the new worker
    os.kill(s.worker.pid, signal.SIGKILL)
    s.worker.wait()
    cluster.worker(s.secret, s.port, s.log, app=APP)
    s.client.patch_queue("durable", paused=False)
    done = s.client.wait(task.id, timeout=40)
    assert done.state is TaskState.SUCCEEDED, [(a.outcome, a.error) for a in done.attempts]
    assert done.result == {"one": 1, "two": 1, "three": "three done", "attempt": 2}
    assert (runs(s.folder, "one"), runs(s.folder, "two"), runs(s.folder, "three")) == (1, 1, 2)
    assert [(step.name, step.attempt) for step in done.steps] == [
        ("one", 1),
        ("two", 1),
        ("three", 2),
    ]
    # The killed attempt's lease cannot record a step, nor change the ones recorded.
    stale = httpx.post(
        f"{first['callback']}/step",
        json={"name": "four", "result": "zombie"},
        headers={"jobgate-lease": first["lease"]},
    )
    assert stale.status_code == 409, stale.text
    assert [step.name for step in s.client.get_task(task.id).steps] == ["one", "two", "three"]


def test_sync_steps_with_generated_names_replay_after_a_retry(
    cluster: Cluster, tmp_path: Path
) -> None:
    s = setup(cluster, tmp_path)
    task = s.client.enqueue("durable", THREE_SYNC, {"args": [str(s.folder)]})
    done = s.client.wait(task.id, timeout=30)
    assert done.result == {"pages": [1, 2], "last": 1, "attempt": 1}
    assert [step.name for step in done.steps] == ["page#1", "page#2", "last"]


def test_a_sleep_pushes_the_task_again_after_it_without_spending_an_attempt(
    cluster: Cluster, tmp_path: Path
) -> None:
    s = setup(cluster, tmp_path, max_attempts=1)
    task = s.client.enqueue("durable", SLEEPER, {"args": [str(s.folder), 3.0]})
    done = s.client.wait(task.id, timeout=40)
    assert done.state is TaskState.SUCCEEDED, [(a.outcome, a.error) for a in done.attempts]
    # max_attempts is 1: a sleep that spent the attempt could not have come back
    assert done.result == {"before": 1, "after": 1, "attempt": 1}
    assert (runs(s.folder, "before"), runs(s.folder, "after")) == (1, 1)
    assert [a.outcome for a in done.attempts] == ["released", "succeeded"]
    assert [step.name for step in done.steps] == ["before", "nap", "after"]
    first, second = pushes(s.log)
    nap = next(step for step in done.steps if step.name == "nap")
    wake = datetime.fromisoformat(str(nap.result["until"])).timestamp()  # type: ignore[index,call-overload]
    # Guarantee: pushed again no sooner than the wake time, and at most the recoverer's
    # interval after it, plus a slack for a push over loopback on a loaded two-core machine.
    slack = 2.0
    assert wake <= second["t"] <= wake + RECOVER_INTERVAL + slack
    assert 3.0 - 0.1 <= second["t"] - first["t"] <= 3.0 + RECOVER_INTERVAL + slack


def test_a_swept_durable_task_leaves_nothing_in_redis(cluster: Cluster, tmp_path: Path) -> None:
    """A task that recorded steps, slept (an attempt released) and succeeded is swept by the
    gateway's own recoverer once past its retention, and then no key, field, member or value
    in Redis names it: the sweep's script deletes its steps with its record (they once went
    in a second round trip, which a gateway killed in between never made)."""
    client = cluster.client(cluster.gateway(JOBGATE_SWEEP_INTERVAL="0"))
    retention = 3
    client.put_queue("durable", retention_succeeded=retention)
    port = free_port()
    endpoint = client.add_endpoint("durable", f"http://127.0.0.1:{port}/")
    folder = tmp_path / "effects"
    folder.mkdir()
    cluster.worker(endpoint.secret, port, tmp_path / "pushes.jsonl", app=APP)
    task = client.enqueue("durable", SLEEPER, {"args": [str(folder), 0.2]})
    done = client.wait(task.id, timeout=40)
    assert done.state is TaskState.SUCCEEDED, [(a.outcome, a.error) for a in done.attempts]
    assert [step.name for step in done.steps] == ["before", "nap", "after"]
    assert "jg:{durable}:steps" in traces(cluster.redis_url, {task.id})
    # Swept at its retention, at most the recoverer's interval later (sweep_interval 0); the
    # deadline leaves a loaded two-core machine room.
    until(lambda: not traces(cluster.redis_url, {task.id}), timeout=retention + 30, what="sweep")
    with cluster.api() as api:
        assert api.get(f"/v1/tasks/{task.id}").status_code == 404
