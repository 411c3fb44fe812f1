"""The per-queue cache of the task catalog (``gateway.caches.catalog``): refreshed in the background
when stale, dropped on a local change, compiled once, and stopped before Redis is closed."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from gateway.caches.catalog import Catalog
from gateway.store.catalog import StoredCatalog


class Store:
    """Answers what ``reports`` holds now; ``gate`` (when set) holds reads back."""

    def __init__(self) -> None:
        self.reports: dict[str, str] = {}
        self.reads = 0
        self.gate: asyncio.Event | None = None

    def report(self, endpoint: str, at: int, *tasks: dict[str, Any]) -> None:
        self.reports[endpoint] = json.dumps({"at": at, "tasks": list(tasks)})

    async def read(self, queue: str) -> StoredCatalog:
        self.reads += 1
        if self.gate is not None:
            await self.gate.wait()
        return StoredCatalog(dict(self.reports), {})


def typed(kind: str) -> dict[str, Any]:
    return {"name": "t", "schema": {"type": kind}}


async def test_stale_entries_are_used_while_one_refresh_runs() -> None:
    store = Store()
    store.report("ep", 1, typed("integer"))
    catalog = Catalog(store, ttl=0.0)  # type: ignore[arg-type]
    first = await catalog.view("q")
    assert first.tasks["t"].problems(5) == []
    store.report("ep", 2, typed("string"))
    store.gate = asyncio.Event()
    assert await catalog.view("q") is first  # stale: answered at once, one refresh started
    assert await catalog.view("q") is first
    await asyncio.sleep(0)  # the refresh starts, and waits at the gate
    assert store.reads == 2
    store.gate.set()
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert [p.field for p in (await catalog.view("q")).tasks["t"].problems(5)] == ["payload"]


async def test_forget_makes_the_next_view_read_afresh() -> None:
    store = Store()
    catalog = Catalog(store, ttl=3600)  # type: ignore[arg-type]
    assert (await catalog.view("q")).tasks == {}
    store.report("ep", 1, typed("integer"))
    assert (await catalog.view("q")).tasks == {}  # cached
    catalog.forget("q")
    assert list((await catalog.view("q")).tasks) == ["t"]


async def test_the_same_schema_is_compiled_once() -> None:
    store = Store()
    store.report("a", 1, typed("integer"))
    store.report("b", 2, typed("integer"))
    catalog = Catalog(store, ttl=3600)  # type: ignore[arg-type]
    first = (await catalog.view("q")).tasks["t"].validator
    assert (await catalog.fresh("q")).tasks["t"].validator is first


async def test_close_stops_a_refresh_under_way() -> None:
    store = Store()
    catalog = Catalog(store, ttl=0.0)  # type: ignore[arg-type]
    await catalog.view("q")
    store.gate = asyncio.Event()  # never set: the refresh would wait forever
    await catalog.view("q")
    await asyncio.sleep(0)
    assert store.reads == 2
    await asyncio.wait_for(catalog.close(), 1)
