"""``examples/cloud-run`` as Cloud Run runs it — its Procfile's uvicorn command on ``$PORT`` —
against a live gateway and a real Redis: a short task answered inline, and a task longer than
its lease answered inline too, kept alive by its heartbeats."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

import pytest

from sdk import TaskState
from tests.support import free_port

from .conftest import ROOT, Cluster, wait_http

pytestmark = pytest.mark.e2e

EXAMPLE = ROOT / "examples" / "cloud-run"


def procfile_command(port: int) -> list[str]:
    """The Procfile's ``web`` command, bound to loopback for the test."""
    (line,) = [x for x in (EXAMPLE / "Procfile").read_text().splitlines() if x.startswith("web:")]
    words = shlex.split(line.removeprefix("web:").replace("${PORT:-8080}", str(port)))
    assert words[0] == "uvicorn"
    words[words.index("--host") + 1] = "127.0.0.1"
    return [sys.executable, "-m", *words]


def test_the_cloud_run_worker_answers_inline(cluster: Cluster) -> None:
    client = cluster.client(cluster.gateway())
    client.put_queue("cloud-run", lease_timeout=3, push_timeout=60)
    port = free_port()
    secret = client.add_endpoint("cloud-run", f"http://127.0.0.1:{port}/").secret
    env = {**os.environ, "JOBGATE_WORKER_SECRET": secret, "PORT": str(port)}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    proc = subprocess.Popen(procfile_command(port), cwd=EXAMPLE, env=env)
    cluster.procs.append(proc)
    wait_http(f"http://127.0.0.1:{port}/", proc)

    short = client.enqueue("cloud-run", "word_count", {"args": ["one two three"]})
    # Four steps of 1 s: 4 s, longer than the 3 s lease, which the heartbeats (every lease/3)
    # extend; a 1.5 s lease expired once at load 20, when a heartbeat came more than 1.5 s late.
    long = client.enqueue("cloud-run", "report", {"args": [4], "kwargs": {"pause": 1.0}})

    done = client.wait(short.id, timeout=20)
    assert (done.state, done.result) == (TaskState.SUCCEEDED, 3)
    done = client.wait(long.id, timeout=30)
    assert (done.state, done.result) == (TaskState.SUCCEEDED, {"steps": 4})
    (attempt,) = done.attempts  # one attempt, answered inline although it outlived its lease
    assert (attempt.outcome, attempt.http_status) == ("succeeded", 200)
    assert done.progress == 1.0
