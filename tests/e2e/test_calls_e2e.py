"""Durable HTTP calls end to end (docs/durable.md, "A durable HTTP call"): real gateway and
worker processes, a real Redis, and a loopback service in the test's process that answers after
a while and counts the requests it gets. The worker is SIGKILLed while the call is outstanding:
the gateway makes the call alone and the task resumes with the answer, the call made once. A
gateway SIGKILLed mid-call leaves the call to another after its lease: made again
(at-least-once), with the same Idempotency-Key."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sdk import Task, TaskState
from tests.call_service import CallService

from .conftest import Cluster
from .test_durable_e2e import APP, Setup, runs, setup, until

pytestmark = pytest.mark.e2e

CALLER = "tests.e2e.durable_worker_app.caller"


@pytest.fixture
def service() -> Iterator[CallService]:
    with CallService() as service:
        yield service


def calling(
    cluster: Cluster, tmp_path: Path, service: CallService, url: str, timeout: float
) -> tuple[Setup, Task]:
    """A gateway and a worker; a task of ``caller`` enqueued, and its call to ``url`` begun."""
    s = setup(cluster, tmp_path, lease_timeout=3.0, max_attempts=3)
    task = s.client.enqueue("durable", CALLER, {"args": [str(s.folder), url, timeout]})
    until(lambda: service.count() == 1, what="the gateway made the call")
    return s, task


def test_a_call_goes_on_while_no_worker_runs_and_resumes_the_task(
    cluster: Cluster, tmp_path: Path, service: CallService
) -> None:
    url = service.url + "/slow?s=10"  # over three of the task's 3 s leases
    s, task = calling(cluster, tmp_path, service, url, timeout=60)
    started = time.monotonic()
    os.kill(s.worker.pid, signal.SIGKILL)  # no worker while the service takes 10 s
    s.worker.wait()
    s.client.patch_queue("durable", paused=True)  # the resumed attempt waits for a new worker
    seen = s.client.get_task(task.id)
    assert seen.state is TaskState.SCHEDULED
    assert seen.wait is not None
    assert seen.wait.call is not None
    assert (seen.wait.call.method, seen.wait.call.url) == ("POST", url)
    # The answer comes while no worker runs: the task is ready with the step recorded.
    recorded = until(
        lambda: [x for x in s.client.get_task(task.id).steps if x.name == "api"],
        timeout=60,
        what="the call's step recorded",
    )
    assert time.monotonic() - started >= 8
    assert service.count() == 1
    assert s.client.get_task(task.id).state is TaskState.QUEUED
    cluster.worker(s.secret, s.port, s.log, app=APP)
    s.client.patch_queue("durable", paused=False)
    done = s.client.wait(task.id, timeout=60)
    assert done.state is TaskState.SUCCEEDED, [(a.outcome, a.error) for a in done.attempts]
    result = done.result
    assert isinstance(result, dict)
    answer = result["answer"]
    assert isinstance(answer, dict)
    assert answer["status"] == 200
    assert answer["body"] == {
        "n": 1,
        "method": "POST",
        "key": f"{task.id}:api",
        "body": '{"amount":3}',
    }
    assert recorded[0].result == answer
    # Made exactly once; the step before it ran once; no attempt was spent waiting.
    assert service.count() == 1
    assert (runs(s.folder, "before"), runs(s.folder, "after")) == (1, 1)
    assert [a.outcome for a in done.attempts] == ["released", "succeeded"]


def test_a_call_cut_short_by_a_gateway_sigkill_is_made_again_after_its_lease(
    cluster: Cluster, tmp_path: Path, service: CallService
) -> None:
    s, task = calling(cluster, tmp_path, service, service.url + "/slow?s=3", timeout=5)
    first = cluster.procs[0]
    first.send_signal(signal.SIGKILL)
    first.wait()
    other = cluster.client(cluster.gateway())
    # After the call's lease (its 5 s timeout + 15 s) the other gateway's recoverer makes it.
    done = other.wait(task.id, timeout=60)
    assert done.state is TaskState.SUCCEEDED, [(a.outcome, a.error) for a in done.attempts]
    assert service.count() == 2
    keys = {seen.key for seen in service.seen}
    assert keys == {f"{task.id}:api"}
    result = done.result
    assert isinstance(result, dict)
    assert result["answer"]["body"]["n"] == 2  # type: ignore[index,call-overload]
    assert (runs(s.folder, "before"), runs(s.folder, "after")) == (1, 1)
