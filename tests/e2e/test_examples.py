"""The examples as a new user runs them: against a gateway, what their README says they print;
with no gateway to talk to, one line and exit code 1."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.support import bind, free_port

from .conftest import ADMIN, ROOT, Cluster, wait_http

pytestmark = pytest.mark.e2e

EXAMPLES = ROOT / "examples"


@pytest.mark.parametrize("example", ["hello", "workflow"])
@pytest.mark.parametrize("script", ["worker.py", "producer.py"])
def test_an_example_without_a_gateway_ends_in_one_line(example: str, script: str) -> None:
    closed = bind()  # bound, never listening: connections are refused
    url = f"http://127.0.0.1:{closed.getsockname()[1]}"
    env = {**os.environ, "JOBGATE_URL": url, "JOBGATE_API_KEY": "k" * 16}
    env.pop("JOBGATE_WORKER_SECRET", None)
    try:
        done = subprocess.run(
            [sys.executable, str(EXAMPLES / example / script)],
            env=env,
            capture_output=True,
            text=True,
            timeout=30,
        )
    finally:
        closed.close()
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr == (
        f"{script}: error: cannot reach the gateway at {url}: Connection refused\n"
    )


def printed(readme: str) -> str:
    """The output the README says the producer prints (the block after "prints:")."""
    found = re.search(r"prints:\n\n```\n(.*?)```", readme, re.DOTALL)
    assert found, "the README shows what the producer prints"
    return found.group(1)


def test_the_workflow_example_prints_what_its_readme_says(cluster: Cluster) -> None:
    """The worker registers the queue and itself, the producer runs the order workflow: a chain
    passing the price on, a charge recorded once, a durable sleep, a failed shipment retried
    with the charge replayed."""
    example = EXAMPLES / "workflow"
    port = free_port()
    env = {
        **os.environ,
        "JOBGATE_URL": cluster.gateway(),
        "JOBGATE_API_KEY": ADMIN,
        "WORKFLOW_PORT": str(port),
    }
    env.pop("JOBGATE_WORKER_SECRET", None)
    worker = subprocess.Popen([sys.executable, str(example / "worker.py")], env=env)
    cluster.procs.append(worker)
    wait_http(f"http://127.0.0.1:{port}/", worker)
    done = subprocess.run(
        [sys.executable, str(example / "producer.py")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == printed((example / "README.md").read_text())
