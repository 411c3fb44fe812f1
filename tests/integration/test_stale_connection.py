"""A worker that closes a pooled keep-alive connection as a push arrives on it.

A server closes idle keep-alive connections after its own timeout (uvicorn: 5 s), while the
gateway's pool keeps them for 60 s: a push sent just as the server closes one fails at once,
unanswered and unread. In a fault-free two-gateway drain (bench/HISTORY.md, "Tasks pushed
twice in a fault-free drain") this spent an attempt on 1 to 64 tasks of 10,000, each retried
behind the queue's backoff: the gateway now sends such a push once more on a new connection.
A connection the worker drops on its first request is the worker's failure, and stays one.

The worker is raw HTTP/1.1 on asyncio streams, so when it closes a connection is exact.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest

from tests.scripted_worker import ADMIN, Rig, Worker
from tests.support import live_gateway


@dataclass
class ClosingWorker:
    """Answers every push 200 on keep-alive connections, except one: the first push that is
    request number ``drop_at`` (from 0) of its connection, on which it closes the connection
    after reading the request's head, unanswered (its body left unread)."""

    drop_at: int
    answered: list[str] = field(default_factory=list)  # webhook-id of each push answered
    dropped: list[str] = field(default_factory=list)
    connections: int = 0

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        served = 0
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except asyncio.IncompleteReadError:
                    return
                lines = head.decode().split("\r\n")[1:-2]
                headers = {name.lower(): value for name, value in (x.split(": ", 1) for x in lines)}
                push = headers["webhook-id"]
                if served == self.drop_at and not self.dropped:
                    self.dropped.append(push)
                    return
                await reader.readexactly(int(headers["content-length"]))
                self.answered.append(push)
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n")
                writer.write(b"content-length: 4\r\n\r\nnull")
                await writer.drain()
                served += 1
        finally:
            writer.close()


@pytest.fixture
async def gateway(redis_url: str) -> AsyncIterator[Rig]:
    async with live_gateway(redis_url, ADMIN) as (gateway_url, api):
        rig = Rig(api, Worker(), gateway_url)
        await rig.queue("q", backoff={"strategy": "constant", "base_delay": 0.1, "max_delay": 1})
        yield rig


async def serving(rig: Rig, worker: ClosingWorker) -> asyncio.Server:
    server = await asyncio.start_server(worker.serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    r = await rig.api.post("/v1/queues/q/endpoints", json={"url": f"http://127.0.0.1:{port}/"})
    assert r.status_code == 201, r.text
    return server


async def test_a_push_on_a_pooled_connection_closed_under_it_goes_again_on_a_new_one(
    gateway: Rig,
) -> None:
    worker = ClosingWorker(drop_at=1)
    async with await serving(gateway, worker):
        first = await gateway.enqueue("noop")
        assert (await gateway.finished(first))["state"] == "succeeded"  # its connection pooled
        second = await gateway.enqueue("noop")
        task = await gateway.finished(second)
    assert worker.dropped == [second]
    assert task["state"] == "succeeded"
    assert [(a["number"], a["outcome"]) for a in task["attempts"]] == [(1, "succeeded")]
    assert worker.answered == [first, second]
    assert worker.connections == 2


async def test_a_new_connection_closed_unanswered_is_the_workers_failure(gateway: Rig) -> None:
    worker = ClosingWorker(drop_at=0)
    async with await serving(gateway, worker):
        task_id = await gateway.enqueue("noop")
        task = await gateway.finished(task_id)
    assert worker.dropped == [task_id]
    outcomes = [(a["number"], a["outcome"], a["failure"]) for a in task["attempts"]]
    assert outcomes == [(1, "error", "connection"), (2, "succeeded", None)]
    assert worker.answered == [task_id]
