"""Writes of one kind coalesced per queue: one round trip at a time, each carrying every item
that arrived while the previous one was in flight. The dispatcher records ends of attempts and
acceptances (202) this way, so a busy queue costs a script call per batch, not per task."""

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
        self._pending: dict[str, list[tuple[Item, asyncio.Future[Result]]]] = {}
        self._writers: dict[str, asyncio.Task[None]] = {}

    def submit(self, queue: str, item: Item) -> asyncio.Future[Result]:
        """Queue ``item`` for the next write; the future holds its result. The item is written
        even if nobody awaits the future any more (a cancelled caller loses only the answer)."""
        future: asyncio.Future[Result] = asyncio.get_running_loop().create_future()
        self._pending.setdefault(queue, []).append((item, future))
        if queue not in self._writers:
            self._writers[queue] = asyncio.create_task(self._drain(queue), name=f"write:{queue}")
        return future

    async def _drain(self, queue: str) -> None:
        try:
            while batch := self._pending.pop(queue, []):
                try:
                    results = await self._write(queue, [item for item, _ in batch])
                except Exception as e:
                    for _, future in batch:
                        if not future.done():
                            future.set_exception(e)
                    continue
                for (_, future), result in zip(batch, results, strict=True):
                    if not future.done():
                        future.set_result(result)
        finally:
            del self._writers[queue]
