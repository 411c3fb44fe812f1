"""The gateway's own CPU per task on the drain's path, without HTTP: claims, push bodies and
signatures, answers read, ends recorded, metrics, against a real Redis.

A managed Redis, a queue with one endpoint (``--concurrency``, ``--batch``), ``--tasks`` no-op
tasks, and in this process a :class:`~gateway.dispatch.dispatcher.Dispatcher` whose pusher
builds and signs each push as the real one does but answers it at once (200 for a single push,
a ``BatchAnswer`` of 200s for a batch) instead of sending it. The figure is this process's CPU
time (``time.process_time``) per task from the first claim until every task has succeeded:
what one gateway's event loop spends per task, less the HTTP client and the server's own
parts. Redis runs in its own process and is not counted. On a shared machine this moves far
less than a drain's rate (CPU time, not wall time).

``--shared``: two more subscribers of the wake channel, as other gateways' would be, so each
finish goes alone and the queue's loop claims (the drain with two gateways); without it, this
gateway is alone and its finishes carry the next claim.

``--http``: the real pusher instead, posting every push over aiohttp to a bare keep-alive HTTP
server in another process (it answers each request at once, ``null``, or a ``BatchAnswer`` of
200s; its CPU is not counted), on uvloop as the gateway runs: the gateway's CPU per task with
its push client, without the worker's. ``--grow N``: N dispatchers on the same queue (as N
gateways on one Redis would be, minus their pub/sub: each finish wakes every dispatcher here),
so claims race as they do between gateways.

Run: ``.venv/bin/python -m bench.dispatch_cost --batch 32`` (``--repeat``: runs, median).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import uvloop
from redis.asyncio import Redis
from ulid import ULID

from gateway.caches.directory import Directory
from gateway.dispatch.dispatcher import Dispatcher
from gateway.dispatch.pusher import Pusher, new_session
from gateway.serving.redis_server import ManagedRedis, free_port
from gateway.store import keys
from gateway.store.clock import Clock
from gateway.store.endpoint_records import EndpointRecord
from gateway.store.keys import QueueKeys
from gateway.store.queues import QueueStore
from gateway.store.records import NewTask
from gateway.store.scripts import Scripts
from gateway.store.tasks import Finished, TaskStore
from gateway.telemetry.export import METER_NAME, metrics_export
from gateway.telemetry.labels import TaskLabels
from gateway.telemetry.metrics import GatewayMetrics
from sdk.wire import QueuePolicy

SECRET = "whsec_" + base64.b64encode(os.urandom(24)).decode()


class WallClock(Clock):
    def now_ms(self) -> int:
        return int(time.time() * 1000)


SERVER = r"""
import asyncio, sys, uvloop
SINGLE = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 4\r\n\r\nnull"
class Answering(asyncio.Protocol):
    def connection_made(self, transport):
        self.transport, self.buffer = transport, b""
    def data_received(self, data):
        self.buffer += data
        while (end := self.buffer.find(b"\r\n\r\n")) >= 0:
            head = self.buffer[:end].lower()
            at = head.find(b"content-length:")
            length = int(head[at + 15:].split(b"\r\n", 1)[0]) if at >= 0 else 0
            if len(self.buffer) < end + 4 + length:
                return
            body = self.buffer[end + 4:end + 4 + length]
            self.buffer = self.buffer[end + 4 + length:]
            if b"jobgate-batch" not in head:
                self.transport.write(SINGLE)
                continue
            ids = [p.split(b'"', 1)[0] for p in body.split(b'{"id":"')[1:]]
            answer = b'{"results":[' + b",".join(
                b'{"id":"' + i + b'","status":200,"result":null}' for i in ids) + b"]}"
            self.transport.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                b"content-length: %d\r\n\r\n" % len(answer) + answer)
async def main():
    loop = asyncio.get_running_loop()
    server = await loop.create_server(Answering, "127.0.0.1", int(sys.argv[1]))
    await server.serve_forever()
uvloop.run(main())
"""


class AnsweringPusher(Pusher):
    """Builds and signs every push like :class:`Pusher`, and answers it at once."""

    async def _send(self, endpoint, body, headers, push_timeout, started=None):  # type: ignore[no-untyped-def]
        from gateway.dispatch.verdict import Answer

        if "jobgate-batch" not in headers:
            return Answer(200, b"null", "application/json")
        ids = [part.split('"', 1)[0] for part in body.decode().split('{"id":"')[1:]]
        results = ",".join(f'{{"id":"{i}","status":200,"result":null}}' for i in ids)
        return Answer(200, f'{{"results":[{results}]}}'.encode(), "application/json")


async def run(
    redis_url: str,
    tasks: int,
    concurrency: int,
    batch: int,
    metrics: bool,
    port: int | None,
    shared: bool = False,
) -> tuple[float, float]:
    redis = Redis.from_url(redis_url, decode_responses=True)
    await redis.flushall()
    # As if other gateways listened: their finishes then carry no claim (``Ended.alone``).
    listeners = [redis.pubsub() for _ in range(2 if shared else 0)]
    for listener in listeners:
        await listener.subscribe(keys.WAKE_CHANNEL)
    scripts = Scripts(redis)
    await scripts.load()
    store, queues, clock = TaskStore(redis, scripts), QueueStore(redis, scripts), WallClock()
    now = clock.now_ms()
    await queues.put("q", QueuePolicy(paused=False, max_concurrency=10_000), now)
    endpoint = EndpointRecord(
        id="ep0",
        queue="q",
        url=f"http://127.0.0.1:{port or 9}/",
        concurrency=concurrency,
        capabilities=[],
        secrets=[SECRET],
        created_ms=now,
        batch_size=batch,
    )
    await queues.add_endpoint(endpoint)
    for start in range(0, tasks, 1000):
        new = [
            NewTask(
                id=str(ULID()),
                name="t",
                payload_json="null",
                priority=0,
                created_ms=now,
                run_at_ms=now,
            )
            for _ in range(min(1000, tasks - start))
        ]
        await store.enqueue("q", new, now)
    export = metrics_export({}) if metrics else None
    recorder = (
        GatewayMetrics(
            export.provider.get_meter(METER_NAME), TaskLabels(lambda q: None, lambda q: ())
        )
        if export
        else None
    )
    session = new_session(allow_private=True)
    kind = Pusher if port else AnsweringPusher
    pusher = kind(session, "http://127.0.0.1:8080", metrics=recorder)
    ended = 0
    all_done = asyncio.Event()

    def finished(queue: str, done: Finished) -> None:
        nonlocal ended
        ended += 1
        if ended == tasks:
            all_done.set()

    dispatcher = Dispatcher(
        store, Directory(queues), pusher, clock, metrics=recorder, on_finished=finished
    )
    calls = await _script_calls(redis)
    cpu = time.process_time()
    dispatcher.wake("q")
    await all_done.wait()
    used = time.process_time() - cpu
    assert await redis.zcard(QueueKeys.of("q").succeeded) == tasks
    calls = await _script_calls(redis) - calls
    await dispatcher.stop()
    for listener in listeners:
        await listener.aclose()
    await session.close()
    await redis.aclose()
    if export:
        export.provider.shutdown()
    return used / tasks * 1e6, calls / tasks


async def _script_calls(redis: Redis) -> int:
    stats = await redis.info("commandstats")
    return sum(int(stats[k]["calls"]) for k in ("cmdstat_evalsha", "cmdstat_eval") if k in stats)


def wait_port(port: int) -> None:
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port)).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=128)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-metrics", action="store_true")
    parser.add_argument(
        "--shared",
        action="store_true",
        help="as one of several gateways: finishes carry no claim, the loop claims",
    )
    parser.add_argument("--http", action="store_true", help="push over HTTP, on uvloop")
    args = parser.parse_args()
    found = []
    server = None
    port = None
    if args.http:
        port = free_port()
        server = subprocess.Popen([sys.executable, "-c", SERVER, str(port)])
        wait_port(port)
    try:
        with tempfile.TemporaryDirectory() as tmp, ManagedRedis(Path(tmp)) as managed:
            for _ in range(args.repeat):
                drain = run(
                    managed.url,
                    args.tasks,
                    args.concurrency,
                    args.batch,
                    not args.no_metrics,
                    port,
                    args.shared,
                )
                found.append(uvloop.run(drain) if args.http else asyncio.run(drain))
    finally:
        if server:
            server.terminate()
            server.wait()
    print(
        f"concurrency {args.concurrency}, batch {args.batch}: gateway CPU per task "
        f"{statistics.median(v for v, _ in found):.1f} µs "
        f"(runs {', '.join(f'{v:.1f}' for v, _ in found)}); "
        f"script calls per task {statistics.median(c for _, c in found):.3f}"
    )


if __name__ == "__main__":
    main()
