"""Real processes over loopback: gateways (``python -m gateway serve``) and SDK workers
(uvicorn), each its own process so a test can kill one."""

from __future__ import annotations

import json
import os
import signal
import ssl
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from sdk import Client
from tests import launcher
from tests.support import free_port

ADMIN = "e2e-admin-key-0123456789"
ROOT = Path(__file__).parents[2]
# How long a gateway or worker process may take to answer after its start. A Python process
# imports for about 2 s of CPU before it serves; on two cores shared by the suite's workers
# and whatever else runs, that can stretch past 20 s. It is a deadline, not a wait: a quiet
# machine answers in a second or two.
STARTUP = 60.0


def wait_http(
    url: str,
    proc: launcher.Process,
    timeout: float = STARTUP,
    verify: ssl.SSLContext | bool = True,
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"process for {url} exited with {proc.returncode}")
        try:
            httpx.get(url, timeout=1, verify=verify)
            return
        except httpx.TransportError:
            time.sleep(0.05)
    raise RuntimeError(f"{url} did not answer within {timeout}s")


@dataclass
class Cluster:
    redis_url: str
    tmp: Path
    procs: list[launcher.Process] = field(default_factory=list)
    gateways: list[str] = field(default_factory=list)
    clients: list[Client] = field(default_factory=list)

    def client(self, gateway: str) -> Client:
        made = Client(gateway, ADMIN, timeout=70)
        self.clients.append(made)
        return made

    def gateway(self, log: Path | None = None, **env: str) -> str:
        """Start a gateway process with ``env`` on top of the test's settings; ``log``: a file
        that gets its log lines (standard error), else they go to the test's."""
        port = free_port()
        environ = {
            **os.environ,
            "JOBGATE_REDIS_URL": self.redis_url,
            "JOBGATE_PORT": str(port),
            "JOBGATE_API_KEYS": json.dumps([{"key": ADMIN, "scopes": ["admin"]}]),
            "JOBGATE_ALLOW_PRIVATE_ENDPOINTS": "true",
            "JOBGATE_RECOVER_INTERVAL": "0.05",
            "JOBGATE_LOG_LEVEL": "warning",
            **env,
        }
        proc = launcher.start("gateway", ["serve"], env=environ, cwd=ROOT, stderr=log)
        self.procs.append(proc)
        cert = env.get("JOBGATE_CERTFILE")  # TLS: https, trusting that certificate
        url = f"{'https' if cert else 'http'}://127.0.0.1:{port}"
        verify = ssl.create_default_context(cafile=cert) if cert else True
        wait_http(f"{url}/healthz", proc, verify=verify)
        self.gateways.append(url)
        return url

    def worker(
        self,
        secret: str,
        port: int,
        log: Path,
        app: str = "tests.e2e.worker_app:app",
        **env: str,
    ) -> launcher.Process:
        environ = {**os.environ, "JOBGATE_WORKER_SECRET": secret, "E2E_LOG": str(log), **env}
        proc = launcher.start(
            "uvicorn",
            [app, "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"],
            env=environ,
            cwd=ROOT,
        )
        self.procs.append(proc)
        wait_http(f"http://127.0.0.1:{port}/", proc)
        return proc

    def api(self, gateway: int = 0) -> httpx.Client:
        return httpx.Client(
            base_url=self.gateways[gateway],
            headers={"authorization": f"Bearer {ADMIN}"},
            timeout=70,
        )

    def stop(self) -> None:
        for client in self.clients:
            client.close()
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture
def cluster(redis_url: str, tmp_path: Path) -> Iterator[Cluster]:
    found = Cluster(redis_url, tmp_path)
    try:
        yield found
    finally:
        found.stop()


def pushes(log: Path) -> list[dict[str, Any]]:
    """The pushes a worker logged so far: one JSON line each. A line still being written (no
    newline yet: the worker appends while tests poll) is left for the next read."""
    if not log.exists():
        return []
    *complete, _partial = log.read_text().split("\n")
    return [json.loads(line) for line in complete if line]
