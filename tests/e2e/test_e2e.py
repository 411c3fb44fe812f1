"""End to end: real gateway and worker processes, a real Redis, the SDK on both sides."""

from __future__ import annotations

import os
import signal
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from sdk import Client, TaskCreate, TaskState, task
from tests.support import free_port

from .conftest import ADMIN, Cluster, pushes

pytestmark = pytest.mark.e2e

ECHO = "tests.e2e.worker_app.echo"
SLOW = "tests.e2e.worker_app.slow"
LONG_INLINE = "tests.e2e.worker_app.long_inline"


@dataclass
class Setup:
    client: Client
    worker: Any
    secret: str
    port: int
    log: Path


def setup(cluster: Cluster, tmp_path: Path, **policy: Any) -> Setup:
    gateway = cluster.gateway()
    client = cluster.client(gateway)
    client.put_queue("e2e", **policy)
    port = free_port()
    endpoint = client.add_endpoint("e2e", f"http://127.0.0.1:{port}/", concurrency=64)
    log = tmp_path / "pushes.jsonl"
    worker = cluster.worker(endpoint.secret, port, log)
    return Setup(client, worker, endpoint.secret, port, log)


def until(check: Any, timeout: float = 20, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def test_inline_and_accepted_tasks_succeed(cluster: Cluster, tmp_path: Path) -> None:
    s = setup(cluster, tmp_path)
    inline = s.client.enqueue("e2e", ECHO, {"args": [{"hi": 1}]})
    accepted = s.client.enqueue("e2e", LONG_INLINE, {"args": [1.0]})
    assert s.client.wait(inline.id, timeout=20).result == {"hi": 1}
    done = s.client.wait(accepted.id, timeout=20)
    assert (done.state, done.result) == (TaskState.SUCCEEDED, "called back")
    assert [a.outcome for a in done.attempts] == ["succeeded"]
    assert done.attempts[0].http_status is None  # no inline answer: it came by callback


def test_killed_worker_task_is_redispatched_with_its_checkpoint(
    cluster: Cluster, tmp_path: Path
) -> None:
    s = setup(cluster, tmp_path, lease_timeout=3.0)
    task = s.client.enqueue("e2e", SLOW, {"args": [60]})
    # Progress comes after the worker answered 202: the task runs on, under its lease.
    until(lambda: s.client.get_task(task.id).progress == 0.5, what="attempt 1 accepted")
    (first,) = pushes(s.log)
    # The queue is paused while the worker is replaced, so attempt 2 goes to the new worker
    # however long it takes to start (not only if it starts within the lease).
    s.client.patch_queue("e2e", paused=True)
    os.kill(s.worker.pid, signal.SIGKILL)
    s.worker.wait()
    # A new worker process takes the same port; the gateway retries once the lease expired.
    cluster.worker(s.secret, s.port, s.log)
    s.client.patch_queue("e2e", paused=False)
    done = s.client.wait(task.id, timeout=30)
    assert done.state is TaskState.SUCCEEDED
    assert done.result == {"attempt": 2, "resumed_from": {"step": 1, "attempt": 1}}, [
        (a.outcome, a.http_status, a.error) for a in done.attempts
    ]
    assert [a.outcome for a in done.attempts] == ["expired", "succeeded"]
    assert [a.number for a in done.attempts] == [1, 2]
    logs = [line.message for line in s.client.logs(task.id)]
    assert logs == ["attempt 1 started", "attempt 2 started"]
    # The killed attempt's lease is refused and changes nothing.
    late = httpx.post(
        f"{first['callback']}/result",
        json={"result": "zombie"},
        headers={"jobgate-lease": first["lease"]},
    )
    assert late.status_code == 409
    assert s.client.get_task(task.id).result == done.result


def test_two_gateways_dispatch_each_task_exactly_once(cluster: Cluster, tmp_path: Path) -> None:
    s = setup(cluster, tmp_path, max_concurrency=200)
    second = cluster.client(cluster.gateway())
    ids = []
    for client in (s.client, second):
        for start in range(0, 500, 250):
            batch = [TaskCreate(name=ECHO, payload={"args": [start + i]}) for i in range(250)]
            ids += [t.id for t in client.enqueue_batch("e2e", batch)]
    until(
        lambda: s.client.get_queue("e2e").counts[TaskState.SUCCEEDED] == 1000,
        timeout=60,
        what="1,000 tasks to succeed",
    )
    received = Counter(p["id"] for p in pushes(s.log))
    assert len(received) == 1000
    assert set(received.values()) == {1}, "a task was pushed more than once"
    for task_id in ids[::97]:
        task = s.client.get_task(task_id)
        assert [a.outcome for a in task.attempts] == ["succeeded"]


def test_batched_pushes_to_an_sdk_worker(cluster: Cluster, tmp_path: Path) -> None:
    gateway = cluster.gateway()
    client = cluster.client(gateway)
    client.put_queue("e2e", paused=True)
    port = free_port()
    endpoint = client.add_endpoint(
        "e2e", f"http://127.0.0.1:{port}/", concurrency=64, batch_size=16
    )
    log = tmp_path / "pushes.jsonl"
    cluster.worker(endpoint.secret, port, log)
    tasks = client.enqueue_batch(
        "e2e",
        [TaskCreate(name=ECHO, payload={"args": [i]}) for i in range(40)]
        + [TaskCreate(name=LONG_INLINE, payload={"args": [1.0]})],
    )
    client.patch_queue("e2e", paused=False)
    done = [client.wait(t.id, timeout=30) for t in tasks]
    assert [t.result for t in done[:40]] == list(range(40))
    assert done[40].result == "called back"
    assert {t.state for t in done} == {TaskState.SUCCEEDED}
    assert len(pushes(log)) < 41  # one line per POST: tasks shared pushes


def test_enqueue_and_wait_answers_with_the_finished_task_or_202_as_it_stands(
    cluster: Cluster, tmp_path: Path
) -> None:
    s = setup(cluster, tmp_path)
    with httpx.Client(
        base_url=s.client.url, headers={"authorization": f"Bearer {ADMIN}"}, timeout=30
    ) as http:
        done = http.post(
            "/v1/queues/e2e/tasks",
            params={"wait": 20},
            json={"name": ECHO, "payload": {"args": [{"hi": 2}]}},
        )
        assert done.status_code == 201
        assert (done.json()["state"], done.json()["result"]) == ("succeeded", {"hi": 2})
        going = http.post(
            "/v1/queues/e2e/tasks",
            params={"wait": 0.3},
            json={"name": LONG_INLINE, "payload": {"args": [3.0]}},
        )
        assert going.status_code == 202
        assert going.json()["state"] in ("queued", "running")
        # recorded like any other: it finishes on its own
        assert s.client.wait(going.json()["id"], timeout=20).result == "called back"
        again = http.post(
            "/v1/queues/e2e/tasks",
            params={"wait": 20},
            json={"name": ECHO, "payload": {"args": [1]}, "dedup_key": "once"},
        )
        twice = http.post(
            "/v1/queues/e2e/tasks",
            params={"wait": 20},
            json={"name": ECHO, "payload": {"args": [1]}, "dedup_key": "once"},
        )
        assert (again.status_code, twice.status_code) == (201, 200)
        assert twice.json()["deduplicated"] is True
        assert twice.json()["id"] == again.json()["id"]
        assert twice.json()["result"] == 1


def test_a_handle_of_an_enqueue_that_waited_answers_its_result_without_a_request(
    cluster: Cluster, tmp_path: Path
) -> None:
    s = setup(cluster, tmp_path)

    def echo(value: Any) -> Any:
        return value

    handle = task(queue="e2e", name=ECHO, client=s.client)(echo).apply([{"x": 1}], wait=20)
    assert handle.task.state is TaskState.SUCCEEDED
    s.client.close()  # a request now would fail
    assert handle.result() == {"x": 1}
