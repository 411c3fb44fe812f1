"""A Lambda-style front for the time-limit e2e tests: every push runs in a fresh function
process, killed (SIGKILL, no clean-up) when the function's time limit passes.

An ASGI app served by uvicorn (``Cluster.worker(app="tests.e2e.lambda_front:app")``). Each push
becomes a function URL event (payload 2.0) handed to a sandbox, ``python -m
tests.e2e.lambda_function``, started ahead of time as Lambda starts an execution environment:
its imports (the init phase) are not counted in the limit. The front then waits up to
``LAMBDA_LIMIT`` seconds for the invocation's answer and passes it on; past the limit it kills
the process and answers ``502``, as a function URL does when its function times out. A sandbox
serves one invocation only; the next is started as soon as one is taken.

Environment: ``LAMBDA_LIMIT`` (seconds), ``E2E_LOG`` (one JSON line per push: the attempt, the
answer's status, whether the invocation was killed, its start and end), and what the function
reads (``JOBGATE_WORKER_SECRET``, ``LAMBDA_HANDOVER``).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import sys
import time
from typing import Any

LIMIT = float(os.environ.get("LAMBDA_LIMIT", "3"))
LOG = os.environ.get("E2E_LOG")

Process = asyncio.subprocess.Process


async def _sandbox() -> Process:
    """A function process that has done its imports and waits for its invocation."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.e2e.lambda_function",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    ready = await proc.stdout.readline()
    if ready != b"ready\n":
        raise RuntimeError(f"the function process did not start: {ready!r}")
    return proc


class Front:
    def __init__(self) -> None:
        self._warm: asyncio.Task[Process] | None = None

    def _take(self) -> asyncio.Task[Process]:
        taken = self._warm or asyncio.ensure_future(_sandbox())
        self._warm = asyncio.ensure_future(_sandbox())
        return taken

    async def invoke(self, event: dict[str, Any]) -> tuple[dict[str, Any] | None, float]:
        """The invocation's answer (``None``: killed at the limit) and when it started."""
        proc = await self._take()
        assert proc.stdin is not None
        assert proc.stdout is not None
        began = time.time()
        order = {"event": event, "deadline": began + LIMIT}
        proc.stdin.write(json.dumps(order).encode() + b"\n")
        await proc.stdin.drain()
        try:
            line = await asyncio.wait_for(proc.stdout.readline(), LIMIT)
        except TimeoutError:
            proc.kill()  # SIGKILL: no finally block, no shutdown, no callback
            await proc.wait()
            return None, began
        await proc.wait()
        return json.loads(line), began

    async def close(self) -> None:
        if self._warm is not None:
            proc = None
            with contextlib.suppress(Exception):
                proc = await self._warm
            if proc is not None and proc.returncode is None:
                proc.kill()
                await proc.wait()


def _event(scope: dict[str, Any], body: bytes) -> dict[str, Any]:
    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
    return {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": scope["path"],
        "rawQueryString": "",
        "headers": headers,
        "requestContext": {
            "http": {"method": "POST", "path": scope["path"], "sourceIp": "127.0.0.1"},
            "stage": "$default",
        },
        "body": base64.b64encode(body).decode(),
        "isBase64Encoded": True,
    }


FRONT = Front()


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await FRONT.close()
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["type"] != "http":
        return
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            break
    if scope["method"] != "POST":
        await _respond(send, 200, {"content-type": "text/plain"}, b"lambda front")
        return
    answer, began = await FRONT.invoke(_event(scope, b"".join(chunks)))
    if answer is None:
        status, headers, body = 502, {"content-type": "application/json"}, b'{"Message":null}'
    else:
        status, headers = answer["statusCode"], answer.get("headers", {})
        text = answer.get("body", "")
        body = base64.b64decode(text) if answer.get("isBase64Encoded") else text.encode()
    if LOG:
        attempt = dict(scope["headers"]).get(b"jobgate-attempt", b"").decode()
        record = {"attempt": attempt, "status": status, "killed": answer is None}
        record |= {"began": began, "ended": time.time()}
        with open(LOG, "a") as log:  # noqa: ASYNC230 - a test log line, appended atomically
            log.write(json.dumps(record) + "\n")
    await _respond(send, status, headers, body)


async def _respond(send: Any, status: int, headers: dict[str, str], body: bytes) -> None:
    raw = [(k.encode(), v.encode()) for k, v in headers.items() if k.lower() != "content-length"]
    raw.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})
