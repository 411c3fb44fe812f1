"""The readiness check against a real Redis: what it reports, and that probes cannot load Redis
(one check per TTL, shared by concurrent probes)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis

from gateway.api.openapi import build_openapi
from gateway.services.readiness import Readiness
from gateway.settings import Settings
from gateway.store.scripts import Scripts
from tests.support import gateway_client


class CountingScripts(Scripts):
    """Scripts that count the readiness checks reaching Redis."""

    checks = 0

    async def ensure_loaded(self) -> int:
        self.checks += 1
        await asyncio.sleep(0.01)  # long enough for concurrent probes to overlap
        return await super().ensure_loaded()


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[Redis]:
    client = Redis.from_url(redis_url, decode_responses=True)
    yield client
    await client.aclose()


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def test_ready_when_redis_answers_and_the_loops_run(redis: Redis) -> None:
    scripts = Scripts(redis)
    await scripts.load()
    report = await Readiness(scripts, {"recoverer": lambda: True}).check()
    assert report.ready
    assert report.checks == {"redis": "ok", "scripts": "ok", "loops": "ok"}


async def test_missing_scripts_are_loaded_again(redis: Redis) -> None:
    scripts = Scripts(redis)
    await scripts.load()
    await redis.script_flush()
    assert (await Readiness(scripts, {}).check()).ready
    assert all(await redis.script_exists(*(scripts.sha(n) for n in ("claim", "enqueue"))))


async def test_a_stopped_loop_makes_it_not_ready_and_names_it(redis: Redis) -> None:
    loops = {"recoverer": lambda: False, "dispatcher": lambda: True, "job firing": lambda: False}
    report = await Readiness(Scripts(redis), loops).check()
    assert not report.ready
    assert report.checks["loops"] == "stopped: job firing, recoverer"
    assert report.checks["redis"] == "ok"


async def test_a_stalled_loop_makes_it_not_ready_at_once_and_names_it(redis: Redis) -> None:
    # The firing loop's last turn failed (Redis was down); Redis answers the probe now, but the
    # loop has not caught up: not ready. The loops are read at every probe, not cached with
    # the Redis check, so the answer follows the loop as soon as it works again.
    stuck = {"job firing": True}
    readiness = Readiness(
        Scripts(redis),
        {"recoverer": lambda: False, "job firing": lambda: True},
        stalled={"job firing": lambda: stuck["job firing"], "dispatcher": lambda: False},
        ttl=3600,
    )
    report = await readiness.check()
    assert not report.ready
    assert report.checks == {
        "redis": "ok",
        "scripts": "ok",
        "loops": "stopped: recoverer; stalled: job firing",
    }
    readiness = Readiness(
        Scripts(redis), {}, stalled={"job firing": lambda: stuck["job firing"]}, ttl=3600
    )
    assert not (await readiness.check()).ready
    stuck["job firing"] = False  # its next turn worked
    report = await readiness.check()  # within the ttl: Redis's check is the cached one
    assert report.ready
    assert report.checks["loops"] == "ok"


async def test_unreachable_redis_is_reported_not_raised() -> None:
    dead = Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.5)
    try:
        report = await Readiness(Scripts(dead), {}, timeout=0.5).check()
    finally:
        await dead.aclose()
    assert not report.ready
    # Refused at once, or (as redis-py retries the connection) given up at the timeout.
    assert report.checks["redis"] in ("unreachable (ConnectionError)", "no answer within 0.5s")
    assert report.checks["scripts"].startswith("unknown")


async def test_probes_share_one_check_per_ttl(redis: Redis) -> None:
    scripts = CountingScripts(redis)
    clock = Clock()
    readiness = Readiness(scripts, {}, ttl=1.0, clock=clock)
    reports = await asyncio.gather(*(readiness.check() for _ in range(50)))
    assert scripts.checks == 1
    assert len({r.checked_at for r in reports}) == 1
    clock.now += 0.5
    await readiness.check()
    assert scripts.checks == 1  # still fresh
    clock.now += 0.6
    await readiness.check()
    assert scripts.checks == 2


async def test_probes_answer_without_an_api_key(redis_url: str) -> None:
    async with gateway_client(Settings(redis_url=redis_url), "not-a-key") as client:
        r = await client.get("/readyz")
        assert r.status_code == 200, r.text
        assert r.json()["checks"] == {"redis": "ok", "scripts": "ok", "loops": "ok"}
        r = await client.get("/healthz")
        assert (r.status_code, r.json()) == (200, {"status": "ok"})


def test_the_probes_are_in_the_openapi_document_without_security() -> None:
    paths = build_openapi()["paths"]
    ready, alive = paths["/readyz"]["get"], paths["/healthz"]["get"]
    assert ready["security"] == []
    assert alive["security"] == []
    schema = {"$ref": "#/components/schemas/Readiness"}
    for status in ("200", "503"):
        assert ready["responses"][status]["content"]["application/json"]["schema"] == schema
    # 400: a request target with '#' in it, refused before any route (declared on every path)
    assert set(ready["responses"]) == {"200", "400", "503"}
    assert set(alive["responses"]) == {"200", "400"}
