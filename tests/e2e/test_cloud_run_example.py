"""``examples/cloud-run`` as its README's "Try it locally" runs it, against a live gateway and a
real Redis: the light SDK's wheel and uvicorn installed into the worker's folder, the queue and
the endpoint registered, the worker served as the ``Procfile`` serves it, and the README's
``curl`` enqueue answered with the finished task; then a task longer than its lease, answered
inline too, kept alive by its heartbeats. The image installs the same wheel."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
from pathlib import Path

import pytest

from sdk import TaskState
from tests import local_steps
from tests.support import free_port

from .conftest import ADMIN, ROOT, Cluster, wait_http

pytestmark = pytest.mark.e2e

EXAMPLE = ROOT / "examples" / "cloud-run"
README = EXAMPLE / "README.md"
PORT = "8080"  # the README's; the test's own port replaces it


def test_the_worker_is_served_as_the_procfile_says() -> None:
    """The README's worker command is the Procfile's, with the port given and loopback."""
    (line,) = [x for x in (EXAMPLE / "Procfile").read_text().splitlines() if x.startswith("web:")]
    procfile = shlex.split(line.removeprefix("web:"))
    _, worker, _ = local_steps.steps(README)
    command = shlex.split(worker.replace("\\\n", " ").splitlines()[-1])
    served = command[command.index("uvicorn") :]
    assert [w for w in served if w not in ("0.0.0.0", "127.0.0.1")] == [
        w.replace("${PORT:-8080}", PORT) for w in procfile if w != "0.0.0.0"
    ]


def test_the_image_installs_the_wheel_that_make_sdk_dist_builds(tmp_path: Path) -> None:
    (wheel,) = local_steps.build_sdk_dist(tmp_path).glob("*.whl")
    dockerfile = (EXAMPLE / "Dockerfile").read_text()
    assert f"COPY dist/{wheel.name} /tmp/" in dockerfile
    assert "COPY gateway" not in dockerfile


def test_the_local_steps_run_the_worker_inline(cluster: Cluster, tmp_path: Path) -> None:
    install, worker, enqueue = local_steps.steps(README)
    tree = local_steps.clone(tmp_path)
    gateway = cluster.gateway()
    port = str(free_port())
    env = local_steps.environment(JOBGATE_URL=gateway, JOBGATE_API_KEY=ADMIN)
    script = local_steps.without_make_sdk_dist(install) + worker
    proc = subprocess.Popen(
        ["sh", "-ec", script.replace(PORT, port)], cwd=tree, env=env, start_new_session=True
    )
    try:
        wait_http(f"http://127.0.0.1:{port}/", proc)
        assert local_steps.imports_sdk_from(tree, "build/cloud-run", env)
        client = cluster.client(gateway)
        (endpoint,) = client.list_endpoints("cloud-run")
        assert endpoint.url == f"http://127.0.0.1:{port}/"
        assert client.get_queue("cloud-run").policy.lease_timeout == 60

        done = subprocess.run(
            ["sh", "-ec", enqueue], cwd=tree, env=env, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        answer = json.loads(done.stdout)
        assert (answer["name"], answer["state"], answer["result"]) == ("word_count", "succeeded", 3)

        # Four steps of 1 s: 4 s, longer than a 3 s lease, which the heartbeats (every lease/3)
        # extend; a 1.5 s lease expired once at load 20, when a heartbeat came more than 1.5 s
        # late.
        client.put_queue("cloud-run", lease_timeout=3, push_timeout=60)
        long = client.enqueue("cloud-run", "report", {"args": [4], "kwargs": {"pause": 1.0}})
        finished = client.wait(long.id, timeout=30)
        assert (finished.state, finished.result) == (TaskState.SUCCEEDED, {"steps": 4})
        (attempt,) = finished.attempts  # one attempt, answered inline though it outlived its lease
        assert (attempt.outcome, attempt.http_status) == ("succeeded", 200)
        assert finished.progress == 1.0
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(15)
