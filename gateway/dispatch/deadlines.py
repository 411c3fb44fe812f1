"""Deadlines of many short waits under one timer: the pushes' timeouts and the ends of their
leases (gateway/dispatch/pusher.py, gateway/dispatch/delivery.py).

A push on the hot path used to pay a timer of its own for each (``asyncio.timeout`` or
aiohttp's ``ClientTimeout``, and ``loop.call_later``): an object, a timer handle, a context
manager and closures, set up and torn down for every push, though nearly every push ends long
before. Here a wait is one entry in a heap of deadlines; the one timer is set for the earliest;
an entry that ended is dropped when it comes up, or when the heap is compacted (most of it
ended), so ending a wait costs nothing but a flag.

The waiting side cancels its own task when told (:class:`Cut`) and tells that cancellation
apart from any other as ``asyncio.timeout`` does (``Task.cancelling``/``Task.uncancel``).
"""

from __future__ import annotations

import asyncio
import heapq
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar


class Entry(Protocol):
    ended: bool  # the wait is over: its deadline must be ignored


E = TypeVar("E", bound=Entry)

COMPACT_ABOVE = 256  # ended entries kept, at most about this many more than live ones


class Deadlines(Generic[E]):
    """Calls ``due(entry)`` at each entry's deadline (loop time), unless it ended by then."""

    def __init__(self, due: Callable[[E], None]) -> None:
        self._due = due
        self._heap: list[tuple[float, int, E]] = []
        self._seq = 0
        self._live = 0
        self._timer: asyncio.TimerHandle | None = None
        self._at = 0.0  # when the timer fires
        self._loop: asyncio.AbstractEventLoop | None = None  # the timer's

    def add(self, delay: float, entry: E) -> None:
        """Watch ``entry`` for ``delay`` seconds. Each call is matched by one call of
        :meth:`ended`, once the wait is over or came due (the entry's ``ended`` set first, if
        it may still be held)."""
        loop = asyncio.get_running_loop()
        when = loop.time() + delay
        self._seq += 1
        self._live += 1
        heapq.heappush(self._heap, (when, self._seq, entry))
        if self._timer is None or when < self._at or loop is not self._loop:
            self._arm(loop, when)

    def ended(self) -> None:
        """One entry added here ended or came due (see :meth:`add`)."""
        self._live -= 1
        if len(self._heap) > 2 * self._live + COMPACT_ABOVE:
            self._heap = [item for item in self._heap if not item[2].ended]
            heapq.heapify(self._heap)

    def __len__(self) -> int:
        """Entries held, ended ones included."""
        return len(self._heap)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _arm(self, loop: asyncio.AbstractEventLoop, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._at = when
        self._loop = loop
        self._timer = loop.call_at(when, self._fire)

    def _fire(self) -> None:
        self._timer = None
        heap = self._heap
        loop = asyncio.get_running_loop()
        now = loop.time()
        due: list[E] = []
        while heap and (heap[0][2].ended or heap[0][0] <= now):
            _, _, entry = heapq.heappop(heap)
            if not entry.ended:
                due.append(entry)
        if heap:
            self._arm(loop, heap[0][0])
        for entry in due:
            self._due(entry)


class Cut:
    """A wait in a task that :class:`Deadlines` may cut by cancelling the task."""

    __slots__ = ("cancelling", "cut", "ended", "task")

    def __init__(self) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.task = task
        self.cancelling = task.cancelling()
        self.cut = False
        self.ended = False

    def now(self) -> None:
        """Cut the wait: cancel its task."""
        self.cut = True
        self.task.cancel()

    def was_cut(self) -> bool:
        """Whether the CancelledError being handled is this cut's alone (then it is undone);
        call once, in the handler."""
        return self.cut and self.task.uncancel() <= self.cancelling
