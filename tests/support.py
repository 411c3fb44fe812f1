"""Helpers for tests that run real servers over loopback."""

from __future__ import annotations

import asyncio
import os
import random
import socket
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import uvicorn

T = TypeVar("T")


# Ports for servers a test starts in another process (a gateway, a worker, a Redis): below the
# kernel's ephemeral range, where bind(("127.0.0.1", 0)) and outgoing connections take theirs, and
# each pytest-xdist worker walks its own residue class (port % workers == its index). So neither
# another worker nor a client socket can take a port between free_port() and the server's bind.
_LOWEST = 10_000


def _ephemeral_floor() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768


def _port_walk() -> Iterator[int]:
    """This process's ports to try, in turn: from a random start (another run of the suite on
    the same machine starts elsewhere), stepping over the other workers' ports, wrapping."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    index = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw"))
    span = (_ephemeral_floor() - _LOWEST) // workers  # this worker's number of ports
    step = random.randrange(span)
    while True:
        yield _LOWEST + index + workers * step
        step = (step + 1) % span


_ports = _port_walk()
_ports_lock = threading.Lock()


def free_port() -> int:
    """A TCP port on 127.0.0.1 for a server that another process will bind: free now, never
    handed out by another xdist worker of this run, and out of the kernel's ephemeral range.
    (Use :func:`bind` instead when this process serves on the port itself.)"""
    with _ports_lock:
        for port in _ports:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
                try:
                    probe.bind(("127.0.0.1", port))
                except OSError:  # in use, or lingering in TIME_WAIT: the next one
                    continue
            return port
    raise AssertionError("unreachable: the walk is endless")


def bind() -> socket.socket:
    """A listening-ready socket on a free loopback port, bound now: no other process can take
    the port between choosing it and serving on it."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


@asynccontextmanager
async def live_gateway(
    redis_url: str, api_key: str, **settings: Any
) -> AsyncIterator[tuple[str, Any]]:
    """A gateway served over loopback by a real server in this event loop (its callback URL
    names its real port), with ``api_key`` as an admin key and loopback workers allowed; yields
    its base URL and an httpx client of its API as that key. ``settings`` override the rest."""
    import httpx

    from gateway.app import create_app
    from gateway.settings import ApiKey, Settings

    sock = bind()
    config = Settings(
        **{
            "redis_url": redis_url,
            "port": sock.getsockname()[1],
            "api_keys": [ApiKey(key=api_key, scopes=["admin"])],
            "allow_private_endpoints": True,
            "recover_interval": 0.05,
            **settings,
        }
    )
    async with (
        serve(create_app(config), sock) as url,
        httpx.AsyncClient(base_url=url, headers={"authorization": f"Bearer {api_key}"}) as api,
    ):
        yield url, api


@asynccontextmanager
async def serve(app: Any, sock: socket.socket | None = None) -> AsyncIterator[str]:
    """Serve an ASGI app on 127.0.0.1 in this event loop; yields its base URL."""
    sock = sock or bind()
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        await until(lambda: server.started, timeout=10, what="server start")
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 15)


async def until(
    check: Callable[[], T | Awaitable[T]], *, timeout: float = 10.0, what: str = "condition"
) -> T:
    """Poll ``check`` until it returns something truthy, or fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if asyncio.iscoroutine(value) or isinstance(value, Awaitable):
            value = await value
        if value:
            return value  # type: ignore[return-value]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.02)


@asynccontextmanager
async def gateway_client(settings: Any, api_key: str, tracing: Any = None) -> AsyncIterator[Any]:
    """An httpx client on a gateway app run in-process (its lifespan entered), as ``api_key``;
    ``tracing``: the app's (default: from the environment)."""
    async with gateway_app(settings, api_key, tracing=tracing) as (client, _):
        yield client


@asynccontextmanager
async def gateway_app(
    settings: Any, api_key: str, timeout: float = 5.0, tracing: Any = None
) -> AsyncIterator[tuple[Any, Any]]:
    """:func:`gateway_client`, and the app itself (for what its state shows)."""
    import httpx

    from gateway.app import create_app

    app = create_app(settings, tracing)
    async with app.router.lifespan_context(app) as state:

        async def with_state(scope: Any, receive: Any, send: Any) -> None:
            scope["state"] = dict(state)
            await app(scope, receive, send)

        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=with_state),
            base_url="http://gateway",
            headers={"authorization": f"Bearer {api_key}"},
            timeout=timeout,
        ) as client:
            yield client, app


async def redis_commands_in(redis: Any, window: float) -> int:
    """Commands Redis ran during ``window`` seconds, once it has been quiet for 0.2 s (the
    startup work is done), not counting the INFO calls that measure it."""

    async def commands() -> int:
        return int((await redis.info("stats"))["total_commands_processed"])

    last = [await commands()]

    async def settled() -> bool:
        await asyncio.sleep(0.2)  # no command for this long: the startup work is done
        now = await commands()
        quiet = now - last[0] <= 1  # the INFO itself
        last[0] = now
        return quiet

    await until(settled, what="Redis to settle")
    before = await commands()
    await asyncio.sleep(window)  # the measurement window
    return await commands() - before - 1


def register_queues(redis_url: str, names: list[str], *, paused: bool = False) -> None:
    """Register queues straight in Redis, as ``PUT /v1/queues/{name}`` stores a new one (its
    policy and creation time, its name in the set of queues), in one pipeline: for tests of
    views over many queues, where a thousand API calls would only slow them down."""
    import redis

    from gateway.store import keys
    from sdk.wire import QueuePolicy

    policy = QueuePolicy(paused=paused).model_dump_json()
    now_ms = int(time.time() * 1000)
    with redis.Redis.from_url(redis_url) as r, r.pipeline(transaction=False) as pipe:
        for name in names:
            pipe.hset(keys.queue_hash(name), mapping={"policy": policy, "created_ms": now_ms})
        pipe.sadd(keys.QUEUES, *names)
        pipe.execute()


def traces(redis_url: str, ids: set[str]) -> dict[str, list[str]]:
    """Every key of the Redis at ``redis_url`` that names one of the task ``ids`` in its name,
    a field, a member, an element or a value: key → what named it (80 characters of each). For
    tests that a task deleted leaves nothing behind."""
    import redis

    found: dict[str, list[str]] = {}
    with redis.Redis.from_url(redis_url, decode_responses=True) as r:
        for key in r.scan_iter(count=1000):
            kind = r.type(key)
            words: list[Any]
            if kind == "hash":
                words = [w for pair in r.hgetall(key).items() for w in pair]
            elif kind == "zset":
                words = r.zrange(key, 0, -1)
            elif kind == "set":
                words = list(r.smembers(key))
            elif kind == "list":
                words = r.lrange(key, 0, -1)
            else:
                words = [r.get(key)]
            named = [w for w in [key, *words] if any(i in str(w) for i in ids)]
            if named:
                found[key] = [str(w)[:80] for w in named]
    return found
