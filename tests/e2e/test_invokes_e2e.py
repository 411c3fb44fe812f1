"""Invoke end to end (docs/durable.md, "Invoking a task"): a chain of three tasks, each
invoking the next, with the worker SIGKILLed while the grandchild runs. Real gateway and worker
processes, a real Redis; each step's runs are counted by the lines its function appends to a
file."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from sdk import TaskState

from .conftest import Cluster
from .test_durable_e2e import APP, runs, setup, until

pytestmark = pytest.mark.e2e

TOP = "tests.e2e.durable_worker_app.chain_top"


def test_a_chain_of_three_invokes_survives_a_worker_sigkill(
    cluster: Cluster, tmp_path: Path
) -> None:
    s = setup(cluster, tmp_path, lease_timeout=3.0, max_attempts=3)
    task = s.client.enqueue("durable", TOP, {"args": [str(s.folder)]})
    until(lambda: runs(s.folder, "leaf") == 1, what="the grandchild's step started")
    os.kill(s.worker.pid, signal.SIGKILL)
    s.worker.wait()
    cluster.worker(s.secret, s.port, s.log, app=APP)
    done = s.client.wait(task.id, timeout=60)
    assert done.state is TaskState.SUCCEEDED, [(a.outcome, a.error) for a in done.attempts]
    # ctx.invoke returned each child's result. The grandchild's attempt after the kill is the
    # second, or a later one when a push went to the killed worker's port before the new one
    # listened (a refused connection is an attempt; on a loaded machine it happens).
    result = done.result
    assert isinstance(result, dict)
    leaf = result["mid"]["leaf"]  # type: ignore[index,call-overload]
    assert leaf["work"] == "leaf done"
    assert leaf["attempt"] >= 2, leaf
    assert result == {"before": 1, "mid": {"before": 1, "leaf": leaf}}
    # Every recorded step ran once; only the step the kill cut short ran again.
    assert (runs(s.folder, "top"), runs(s.folder, "mid"), runs(s.folder, "leaf")) == (1, 1, 2)
    assert [step.name for step in done.steps] == ["before", "mid"]
    recorded = done.steps[1].result
    assert recorded["state"] == "succeeded"  # type: ignore[index,call-overload]
    child = s.client.get_task(str(recorded["id"]))  # type: ignore[index,call-overload]
    assert child.state is TaskState.SUCCEEDED
    assert [step.name for step in child.steps] == ["before", "leaf"]
    assert [a.outcome for a in child.attempts] == ["released", "succeeded"]
    # Neither parent spent an attempt waiting.
    assert [a.outcome for a in done.attempts] == ["released", "succeeded"]
