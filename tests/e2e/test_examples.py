"""The examples as a new user runs them: against a gateway, what their README says they print;
with no gateway to talk to, one line and exit code 1; the Lambda example's local steps
(tests/local_steps.py), with no gateway at all."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests import local_steps
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
    """The output the README says the steps print (the block after "prints:" or "print:")."""
    found = re.search(r"prints?:\n\n```\n(.*?)```", readme, re.DOTALL)
    assert found, "the README shows what the steps print"
    return found.group(1)


@pytest.mark.parametrize(
    ("example", "port_variable"), [("hello", "HELLO_PORT"), ("workflow", "WORKFLOW_PORT")]
)
def test_an_example_prints_what_its_readme_says(
    cluster: Cluster, example: str, port_variable: str
) -> None:
    """The README's steps, against a gateway: the worker registers the queue and itself, the
    producer prints exactly what the README shows. hello: a greeting, a batch of three, a task
    with heartbeats. workflow: a chain passing the price on, a charge recorded once, a durable
    sleep, an approval that waits for an event, a failed shipment retried with the rest
    replayed."""
    folder = EXAMPLES / example
    port = free_port()
    env = {
        **os.environ,
        "JOBGATE_URL": cluster.gateway(),
        "JOBGATE_API_KEY": ADMIN,
        port_variable: str(port),
    }
    env.pop("JOBGATE_WORKER_SECRET", None)
    worker = subprocess.Popen([sys.executable, str(folder / "worker.py")], env=env)
    cluster.procs.append(worker)
    wait_http(f"http://127.0.0.1:{port}/", worker)
    done = subprocess.run(
        [sys.executable, str(folder / "producer.py")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == printed((folder / "README.md").read_text())


def test_the_lambda_examples_local_steps_print_what_its_readme_says(tmp_path: Path) -> None:
    """The README's "Try it locally": the SDK's wheel installed with the `lambda` extra into the
    function's folder, zipped, and the handler invoked there with signed pushes."""
    readme = EXAMPLES / "lambda" / "README.md"
    (block,) = local_steps.steps(readme)
    tree = local_steps.clone(tmp_path)
    env = local_steps.environment()
    done = subprocess.run(
        ["sh", "-ec", local_steps.without_make_sdk_dist(block)],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout == printed(readme.read_text())
    assert local_steps.imports_sdk_from(tree, "build/lambda", env)
    package = tree / "build" / "lambda"
    assert sorted(p.name for p in package.iterdir() if not p.name.endswith(".dist-info")) == [
        "handler.py",
        "sdk",
    ]
    with zipfile.ZipFile(tree / "build" / "function.zip") as archive:
        names = archive.namelist()
    assert {"handler.py", "sdk/__init__.py", "sdk/lambda_handler.py"} <= set(names)
    assert not [n for n in names if n.startswith("gateway")]
