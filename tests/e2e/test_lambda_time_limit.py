"""A Lambda-style function with a hard time limit completes a workflow longer than its limit
(issue 22): real gateway and function processes, a real Redis.

The front (tests/e2e/lambda_front.py) runs every push in a fresh process of
tests/e2e/lambda_function.py through ``sdk.lambda_handler`` and SIGKILLs it when the limit
passes. The workflow is seven durable steps of a second each, nearly three times the 2.5 s
limit; each step's side effect is counted in files, not by the SDK's bookkeeping.

- Killed at the limit, each invocation spends an attempt and loses the step it was in, which the
  next invocation runs again after replaying the recorded ones.
- Following the limit (``follow_time_limit``), an invocation hands the task over before a step
  that would not fit: no invocation is killed and no attempt is spent (``max_attempts: 1``).

The limit and the step length leave the kill in the middle of a step (2.5 s: two steps of 1 s
and their records, then half of the third), far from a step's end, so that a step's side effect
and its record are not cut apart on a loaded machine.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sdk import Client, Task, TaskState
from tests.support import free_port

from .conftest import Cluster, pushes

pytestmark = pytest.mark.e2e

LIMIT = 2.5  # seconds an invocation may run
STEPS, SECONDS = 7, 1.0  # the workflow: 7 s of steps


def start(cluster: Cluster, tmp_path: Path, *, handover: bool, max_attempts: int) -> Client:
    client = cluster.client(cluster.gateway())
    client.put_queue(
        "lambda",
        lease_timeout=30,
        push_timeout=30,
        max_attempts=max_attempts,
        backoff={"strategy": "constant", "base_delay": 0.1, "max_delay": 0.1},
        circuit_breaker={"failures": 100},  # a killed invocation counts against the endpoint
    )
    port = free_port()
    endpoint = client.add_endpoint("lambda", f"http://127.0.0.1:{port}/", concurrency=1)
    cluster.worker(
        endpoint.secret,
        port,
        tmp_path / "invocations.jsonl",
        app="tests.e2e.lambda_front:app",
        LAMBDA_LIMIT=str(LIMIT),
        LAMBDA_HANDOVER="1" if handover else "0",
    )
    return client


def lines(folder: Path, name: str) -> int:
    path = folder / name
    return len(path.read_text().splitlines()) if path.exists() else 0


def run_workflow(client: Client, tmp_path: Path) -> tuple[Path, Task, list[dict[str, Any]]]:
    """Enqueue the workflow and wait for it: its folder of side effects, its final record and
    the front's log of invocations."""
    folder = tmp_path / "effects"
    folder.mkdir()
    task = client.enqueue("lambda", "workflow", {"args": [str(folder), STEPS, SECONDS]})
    done = client.wait(task.id, timeout=120)
    assert done.state is TaskState.SUCCEEDED, [(a.outcome, a.error) for a in done.attempts]
    assert done.result == {"steps": list(range(1, STEPS + 1)), "attempt": done.attempt}
    # Each step's side effect happened exactly once, however many invocations it took.
    assert [lines(folder, f"effect-{n}") for n in range(1, STEPS + 1)] == [1] * STEPS
    assert [step.name for step in done.steps] == [f"step-{n}" for n in range(1, STEPS + 1)]
    return folder, done, pushes(tmp_path / "invocations.jsonl")


def test_a_workflow_longer_than_the_limit_completes_through_killed_invocations(
    cluster: Cluster, tmp_path: Path
) -> None:
    client = start(cluster, tmp_path, handover=False, max_attempts=20)
    folder, done, invocations = run_workflow(client, tmp_path)
    killed = [i for i in invocations if i["killed"]]
    assert len(killed) >= 2, invocations  # 7 s of steps, 2.5 s per invocation
    assert invocations[-1]["status"] == 200
    # A kill spends an attempt: each killed invocation is an attempt that ended in error.
    assert done.attempt == len(invocations)
    assert [(a.outcome, a.http_status) for a in done.attempts[:-1]] == [("error", 502)] * len(
        killed
    )
    # The step a kill cut short ran again in the next invocation; the recorded ones did not.
    starts = [lines(folder, f"start-{n}") for n in range(1, STEPS + 1)]
    assert set(starts) <= {1, 2}, starts
    assert sum(starts) == STEPS + len(killed), starts
    assert len({step.attempt for step in done.steps}) == len(invocations)


def test_a_function_that_follows_its_limit_hands_the_task_over_without_spending_attempts(
    cluster: Cluster, tmp_path: Path
) -> None:
    client = start(cluster, tmp_path, handover=True, max_attempts=1)
    folder, done, invocations = run_workflow(client, tmp_path)
    assert not [i for i in invocations if i["killed"]], invocations
    assert len(invocations) >= 3  # at most 2.5 s of steps in each
    assert done.attempt == 1  # max_attempts is 1: one spent attempt would have been the last
    outcomes = [a.outcome for a in done.attempts]
    assert outcomes == ["released"] * (len(invocations) - 1) + ["succeeded"]
    # No step was cut short: each started once.
    assert [lines(folder, f"start-{n}") for n in range(1, STEPS + 1)] == [1] * STEPS
