"""End to end: the operator commands (``python -m gateway queues`` etc.) as subprocesses against
a real gateway process, its Redis, and an SDK worker."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

from sdk import TaskState
from tests import launcher
from tests.support import free_port

from .conftest import ADMIN, ROOT, Cluster

pytestmark = pytest.mark.e2e

SLOW = "tests.e2e.worker_app.slow"
T = TypeVar("T")


def jobgate(gateway: str, *argv: str, key: str | None = ADMIN) -> subprocess.CompletedProcess[str]:
    """Run ``jobgate ARGV`` against ``gateway`` (named by the environment, as ``jobgate dev``
    tells users to), with a stdin that is not a terminal."""
    env = {**os.environ, "JOBGATE_URL": gateway}
    env.pop("JOBGATE_API_KEY", None)
    if key is not None:
        env["JOBGATE_API_KEY"] = key
    return launcher.run("gateway", argv, env=env, cwd=ROOT, timeout=60)


def ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    return done.stdout


def rows(table: str) -> dict[str, list[str]]:
    """A table's rows by their first cell."""
    return {line.split()[0]: line.split() for line in table.splitlines()}


def until(check: Callable[[], T], timeout: float = 20, what: str = "condition") -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def test_queues_and_tasks(cluster: Cluster) -> None:
    gateway = cluster.gateway()
    client = cluster.client(gateway)
    client.put_queue("emails", paused=True)
    client.put_queue("images")
    client.add_endpoint("images", f"http://127.0.0.1:{free_port()}/")
    first = client.enqueue("emails", "send", {"to": "ada"}, owner="acme")
    client.enqueue("emails", "send", {"to": "bob"}, owner="other")
    later = client.enqueue("emails", "send", delay=3600)

    table = rows(ok(jobgate(gateway, "queues")))
    assert table["QUEUE"] == [
        *["QUEUE", "PAUSED", "QUEUED", "SCHEDULED", "WAITING", "RUNNING", "SUCCEEDED"],
        *["FAILED", "DEAD", "ENDPOINTS"],
    ]
    assert table["emails"] == ["emails", "yes", "2", "1", "0", "0", "0", "0", "0", "0"]
    assert table["images"][1:3] == ["no", "0"]
    assert table["images"][-1] == "1"
    listed = json.loads(ok(jobgate(gateway, "queues", "--json")))
    assert {q["name"] for q in listed["items"]} == {"emails", "images"}

    queued = rows(ok(jobgate(gateway, "tasks", "emails")))
    assert queued[first.id][:4] == [first.id, "send", "0/5", "0"]
    assert len(queued) == 3  # the header and two tasks
    scheduled = rows(ok(jobgate(gateway, "tasks", "emails", "--state", "scheduled")))
    assert list(scheduled) == ["ID", later.id]
    page = json.loads(ok(jobgate(gateway, "tasks", "emails", "--limit", "1", "--json")))
    assert len(page["items"]) == 1
    assert page["next_cursor"]

    # Errors: a problem from the gateway, a missing key, a gateway that is not there.
    missing = jobgate(gateway, "tasks", "nope")
    assert (missing.returncode, missing.stdout) == (1, "")
    assert missing.stderr.startswith("jobgate: error: 404 ")
    assert "Traceback" not in missing.stderr
    unauthorised = jobgate(gateway, "queues", key=None)
    assert unauthorised.returncode == 1
    assert "pass --api-key or set JOBGATE_API_KEY" in unauthorised.stderr
    gone = jobgate(f"http://127.0.0.1:{free_port()}", "queues")
    assert gone.returncode == 1
    assert gone.stderr.count("\n") == 1
    assert "cannot reach the gateway" in gone.stderr


def test_tasks_of_an_owner(cluster: Cluster) -> None:
    gateway = cluster.gateway()
    client = cluster.client(gateway)
    client.put_queue("emails", paused=True)
    mine = client.enqueue("emails", "send", owner="acme")
    client.enqueue("emails", "send", owner="other")
    listed = rows(ok(jobgate(gateway, "tasks", "emails", "--owner", "acme")))
    assert list(listed) == ["ID", mine.id]
    assert listed[mine.id][4] == "acme"


def test_dead_letters_are_listed_resubmitted_and_cleaned(cluster: Cluster) -> None:
    gateway = cluster.gateway()
    client = cluster.client(gateway)
    # Nothing listens on the endpoint: each push fails, and one attempt is all a task gets.
    # (The circuit stays closed, so the failures do not pause the endpoint between steps.)
    client.put_queue("flaky", max_attempts=1, circuit_breaker={"failures": 1000})
    client.add_endpoint("flaky", f"http://127.0.0.1:{free_port()}/")
    tasks = [client.enqueue("flaky", "sync", version="v7") for _ in range(3)]
    for task in tasks:
        assert client.wait(task.id, timeout=20).state is TaskState.DEAD

    listed = rows(ok(jobgate(gateway, "dlq", "list", "--queue", "flaky", "--since", "1h")))
    assert set(listed) == {"ID", *(t.id for t in tasks)}
    assert listed[tasks[0].id][1:6] == ["flaky", "sync", "v7", "-", "1"]
    none = jobgate(gateway, "dlq", "list", "--queue", "flaky", "--until", "1h")
    assert (none.returncode, none.stdout) == (0, "")

    out = ok(jobgate(gateway, "dlq", "resubmit", tasks[0].id, tasks[1].id))
    assert out.startswith("requeued 2 dead letters\n")
    again = client.wait(tasks[0].id, timeout=20)  # dies again: the endpoint is still down
    assert again.state is TaskState.DEAD
    assert len(again.attempts) == 2  # the history is kept
    until(lambda: client.get_task(tasks[1].id).state is TaskState.DEAD, what="second death again")

    result = json.loads(ok(jobgate(gateway, "dlq", "resubmit", "--name", "sync", "--json")))
    assert sorted(result["resubmitted"]) == sorted(t.id for t in tasks)
    for task in tasks:
        assert client.wait(task.id, timeout=20).state is TaskState.DEAD

    refused = jobgate(gateway, "clean", "flaky", "--state", "dead")
    assert refused.returncode == 1
    assert "pass --yes" in refused.stderr
    assert client.get_queue("flaky").counts[TaskState.DEAD] == 3
    assert ok(jobgate(gateway, "clean", "flaky", "--state", "dead", "--yes")) == (
        "deleted 3 tasks from flaky\n"
    )
    assert client.get_queue("flaky").counts.get(TaskState.DEAD, 0) == 0
    assert ok(jobgate(gateway, "dlq", "list", "--queue", "flaky")) == ""


def test_running_tasks_show_where_and_how_far(cluster: Cluster, tmp_path: Path) -> None:
    gateway = cluster.gateway()
    client = cluster.client(gateway)
    client.put_queue("e2e")
    port = free_port()
    endpoint = client.add_endpoint("e2e", f"http://127.0.0.1:{port}/")
    cluster.worker(endpoint.secret, port, tmp_path / "pushes.jsonl")
    # Running for longer than the five commands below can take on a loaded machine (each is a
    # Python process of about 1 s of CPU: 118 s in all under load 22, when 60 s let the task
    # finish before the last one); cancelled at the end, so the length costs nothing.
    task = client.enqueue("e2e", SLOW, {"args": [3600]})
    until(lambda: client.get_task(task.id).progress == 0.5, what="the task's progress")

    running = rows(ok(jobgate(gateway, "tasks", "--running")))
    row = running[task.id]
    assert row[1:5] == ["e2e", SLOW, "1", f"http://127.0.0.1:{port}/"]
    assert row[-2:] == ["50%", "-"]  # heartbeats flow: not stalled
    only = json.loads(ok(jobgate(gateway, "tasks", "--running", "--queue", "e2e", "--json")))
    assert [t["id"] for t in only["items"]] == [task.id]
    client.put_queue("other")
    assert ok(jobgate(gateway, "tasks", "--running", "--queue", "other")) == ""
    assert task.id in ok(jobgate(gateway, "tasks", "e2e", "--state", "running"))
    client.cancel(task.id)  # the worker stops it at its next heartbeat, so teardown is quick
    until(lambda: client.get_task(task.id).state is TaskState.CANCELLED, what="cancellation")


def test_bad_input_is_named_not_a_traceback(cluster: Cluster) -> None:
    gateway = cluster.gateway()
    cluster.client(gateway).put_queue("emails")
    # A limit past the gateway's: a wrong argument, exit 2 after the usage line (docs/cli.md).
    bad = jobgate(gateway, "tasks", "emails", "--limit", "100000")
    assert bad.returncode == 2
    assert bad.stderr.startswith("usage: jobgate tasks ")
    assert "--limit must be from 1 to 500" in bad.stderr
    assert "Traceback" not in bad.stderr
    # A value only the gateway can refuse: its problem, named, exit 1.
    refused = jobgate(gateway, "tasks", "emails", "--owner", "o" * 300)
    assert refused.returncode == 1
    assert refused.stderr.startswith("jobgate: error: 422")
    assert "owner" in refused.stderr
    assert "Traceback" not in refused.stderr
