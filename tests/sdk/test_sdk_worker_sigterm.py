"""A real worker process under uvicorn, sent SIGTERM while a task runs in the background: with
``shutdown="requeue"`` it hands the task back by the ``release`` callback, then exits."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import httpx

from tests.sdk.fakes import LEASE, SECRET, FakeGateway, Pusher
from tests.support import free_port, serve, until

ROOT = Path(__file__).parents[2]


async def _started(url: str, proc: asyncio.subprocess.Process) -> httpx.Response | None:
    assert proc.returncode is None, f"the worker exited with {proc.returncode}"
    try:
        async with httpx.AsyncClient() as http:
            return await http.get(url, timeout=1)
    except httpx.TransportError:
        return None


async def test_sigterm_hands_the_running_task_back() -> None:
    gateway = FakeGateway()
    port = free_port()
    command = ["-m", "uvicorn", "tests.sdk.sigterm_worker:worker", "--host", "127.0.0.1"]
    command += ["--port", str(port), "--log-level", "warning"]
    env = {**os.environ, "SIGTERM_WORKER_SECRET": SECRET}
    async with serve(gateway.app()) as gateway_url:
        proc = await asyncio.create_subprocess_exec(sys.executable, *command, cwd=ROOT, env=env)
        try:
            worker_url = f"http://127.0.0.1:{port}/"
            await until(lambda: _started(worker_url, proc), timeout=20, what="worker start")
            async with httpx.AsyncClient(base_url=worker_url) as http:
                response = await Pusher(http, gateway=gateway_url)("endless")
            assert response.status_code == 202
            await gateway.wait_for("logs", within=10)  # the task runs
            proc.send_signal(signal.SIGTERM)
            [release] = await gateway.wait_for("release", within=10)
            returncode = await asyncio.wait_for(proc.wait(), 15)
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    assert (release.lease, release.body) == (LEASE, {})
    assert gateway.kinds() == ["logs", "release"]
    # uvicorn re-raises the signal once its graceful shutdown is done: -15 is a clean end here
    assert returncode in (0, -signal.SIGTERM)
