"""The examples as a new user runs them: with no gateway to talk to, one line and exit code 1."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.support import bind

from .conftest import ROOT

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("script", ["worker.py", "producer.py"])
def test_an_example_without_a_gateway_ends_in_one_line(script: str) -> None:
    closed = bind()  # bound, never listening: connections are refused
    url = f"http://127.0.0.1:{closed.getsockname()[1]}"
    env = {**os.environ, "JOBGATE_URL": url, "JOBGATE_API_KEY": "k" * 16}
    env.pop("JOBGATE_WORKER_SECRET", None)
    try:
        done = subprocess.run(
            [sys.executable, str(ROOT / "examples" / "hello" / script)],
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
