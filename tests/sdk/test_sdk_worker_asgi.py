"""The worker's plain ASGI side (sdk/asgi.py), beside pushes: GET and HEAD describe it, other
methods are refused, and the lifespan protocol runs its lifespan, reporting a failure."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from sdk import Worker, task
from tests.sdk.fakes import SECRET


@task("default", name="b_task")
def b_task() -> None: ...


@task("default", name="a_task")
def a_task() -> None: ...


async def test_get_and_head_describe_the_worker_and_other_methods_get_405() -> None:
    worker = Worker(tasks=[b_task, a_task], secret=SECRET)
    transport = httpx.ASGITransport(app=worker)
    async with httpx.AsyncClient(transport=transport, base_url="http://worker") as http:
        described = await http.get("/any/path")
        head = await http.head("/")
        refused = await http.put("/")
    assert described.status_code == 200
    assert described.headers["content-type"] == "application/json"
    assert described.json() == {"tasks": ["a_task", "b_task"]}
    assert (head.status_code, head.content) == (200, b"")
    assert head.headers["content-length"] == str(len(described.content))
    assert refused.status_code == 405
    assert refused.headers["allow"] == "GET, HEAD, POST"


async def run_lifespan(
    worker: Worker, messages: list[str]
) -> tuple[list[str], BaseException | None]:
    """The messages the worker sent while given ``messages``, and what it raised."""
    incoming = iter(messages)
    sent: list[str] = []

    async def receive() -> dict[str, Any]:
        return {"type": next(incoming)}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message["type"])

    try:
        await worker({"type": "lifespan"}, receive, send)
    except Exception as e:
        return sent, e
    return sent, None


async def test_the_lifespan_protocol_opens_and_closes_the_worker(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    worker = Worker(tasks=[a_task], secret=SECRET)
    calls: list[str] = []
    opened, closed = worker.runner.open, worker.runner.close

    def open_() -> None:
        calls.append("open")
        opened()

    async def close() -> None:
        calls.append("close")
        await closed()

    monkeypatch.setattr(worker.runner, "open", open_)
    monkeypatch.setattr(worker.runner, "close", close)
    sent, error = await run_lifespan(worker, ["lifespan.startup", "lifespan.shutdown"])
    assert (sent, error) == (["lifespan.startup.complete", "lifespan.shutdown.complete"], None)
    assert calls == ["open", "close"]


async def test_a_lifespan_that_fails_to_start_is_reported_to_the_server(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    worker = Worker(tasks=[a_task], secret=SECRET)

    def broken() -> None:
        raise RuntimeError("no")

    monkeypatch.setattr(worker.runner, "open", broken)
    sent, error = await run_lifespan(worker, ["lifespan.startup"])
    assert sent == ["lifespan.startup.failed"]
    assert isinstance(error, RuntimeError)
