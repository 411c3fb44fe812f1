"""Writes of one kind coalesced per queue: one round trip at a time, each carrying every item
that arrived while the previous one was in flight. The dispatcher records ends of attempts and
acceptances (202) this way, so a busy queue costs a script call per batch, not per task; the
answers of one push go in together, under one future."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")


class Coalescer(Generic[Item, Result]):
    """``write(queue, items)`` returns one result per item, in order; a write that raises fails
    every item of its batch."""

    def __init__(self, write: Callable[[str, list[Item]], Awaitable[Sequence[Result]]]) -> None:
        self._write = write
        self._pending: dict[str, list[tuple[Sequence[Item], asyncio.Future[list[Result]]]]] = {}
        self._writers: dict[str, asyncio.Task[None]] = {}

    def submit(self, queue: str, items: Sequence[Item]) -> asyncio.Future[list[Result]]:
        """Queue ``items`` for the next write; the future holds their results, in order. They
        are written even if nobody awaits the future any more (a cancelled caller loses only
        the answer)."""
        future: asyncio.Future[list[Result]] = asyncio.get_running_loop().create_future()
        self._pending.setdefault(queue, []).append((items, future))
        if queue not in self._writers:
            self._writers[queue] = asyncio.create_task(self._drain(queue), name=f"write:{queue}")
        return future

    async def _drain(self, queue: str) -> None:
        try:
            while batch := self._pending.pop(queue, []):
                items = [item for group, _ in batch for item in group]
                try:
                    results = await self._write(queue, items)
                    if len(results) != len(items):
                        raise RuntimeError(f"{len(results)} results for {len(items)} items")
                except Exception as e:
                    for _, future in batch:
                        if not future.done():
                            future.set_exception(e)
                    continue
                start = 0
                for group, future in batch:
                    end = start + len(group)
                    if not future.done():
                        future.set_result(list(results[start:end]))
                    start = end
        finally:
            del self._writers[queue]
