"""The SDK worker's own CPU per push, without a network or a gateway: signed pushes of a no-op
task handed straight to the ``Worker`` ASGI app, one after another, on uvloop.

Prints µs per push for a single push and per task for a batch of 32. Use it to compare a change
to the worker's push path before and after in one sitting. Run:
``.venv/bin/python -m bench.worker_overhead``.
"""

from __future__ import annotations

import argparse
import json
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import uvloop
from standardwebhooks import Webhook
from ulid import ULID

from sdk import Worker, task
from sdk.wire import HEADER_BATCH, HEADER_CALLBACK, HEADER_LEASE

SECRET = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


@task(queue="bench", name="noop")
async def noop() -> None:
    return None


def body(task_id: str) -> dict[str, Any]:
    now = datetime.now(UTC)
    return {
        "id": task_id,
        "queue": "bench",
        "name": "noop",
        "payload": {"args": [], "kwargs": {}},
        "attempt": 1,
        "checkpoint": None,
        "lease_expires_at": (now + timedelta(seconds=30)).isoformat(),
        "deadline": (now + timedelta(hours=1)).isoformat(),
    }


def signed(message_id: str, content: bytes, extra: dict[str, str]) -> list[tuple[bytes, bytes]]:
    now = datetime.now(UTC)
    headers = {
        "host": "127.0.0.1:8000",
        "user-agent": "Python/3.11 aiohttp/3.12",
        "content-type": "application/json",
        "content-length": str(len(content)),
        "webhook-id": message_id,
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": Webhook(SECRET).sign(message_id, now, content.decode()),
        **extra,
    }
    return [(k.encode(), v.encode()) for k, v in headers.items()]


def single() -> tuple[bytes, list[tuple[bytes, bytes]]]:
    task_id = str(ULID())
    content = json.dumps(body(task_id)).encode()
    extra = {HEADER_LEASE: "lease", HEADER_CALLBACK: f"http://127.0.0.1:1/v1/callbacks/{task_id}"}
    return content, signed(task_id, content, extra)


def batch(size: int) -> tuple[bytes, list[tuple[bytes, bytes]]]:
    items = []
    for _ in range(size):
        item = body(str(ULID()))
        item.update(lease="lease", callback=f"http://127.0.0.1:1/v1/callbacks/{item['id']}")
        items.append(item)
    content = json.dumps({"tasks": items}).encode()
    return content, signed(f"batch_{ULID()}", content, {HEADER_BATCH: str(size)})


async def measure(worker: Worker, requests: list[tuple[bytes, list[tuple[bytes, bytes]]]]) -> float:
    """Seconds of CPU to answer ``requests`` one after another."""
    statuses = []

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    started = time.process_time()
    for content, headers in requests:
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": "/",
            "raw_path": b"/",
            "root_path": "",
            "query_string": b"",
            "headers": headers,
            "server": ("127.0.0.1", 8000),
            "client": ("127.0.0.1", 5000),
        }
        messages = [{"type": "http.request", "body": content, "more_body": False}]

        async def receive(messages: list[dict[str, Any]] = messages) -> dict[str, Any]:
            return messages.pop(0)

        await worker(scope, receive, send)
    elapsed = time.process_time() - started
    assert set(statuses) == {200}, set(statuses)
    return elapsed


async def run(pushes: int, size: int, singles: bool = True) -> None:
    worker = Worker(tasks=[noop], secret=SECRET)
    async with worker.lifespan():
        await measure(worker, [single() for _ in range(200)])  # warm up
        if singles:
            one = await measure(worker, [single() for _ in range(pushes)])
            print(f"single push: {one / pushes * 1e6:.1f} µs per push")
        many = await measure(worker, [batch(size) for _ in range(pushes // size)])
    print(f"batches of {size}: {many / (pushes // size * size) * 1e6:.1f} µs per task")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pushes", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--batches-only", action="store_true", help="skip the single pushes")
    args = parser.parse_args()
    uvloop.run(run(args.pushes, args.batch, not args.batches_only))


if __name__ == "__main__":
    main()
