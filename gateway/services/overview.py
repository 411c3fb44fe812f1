"""Every queue at a glance, at any number of queues: a searchable, sortable, paged list of rows
(paused or not, tasks per state, finished tasks per minute) and queue names for pickers.

A page reads the queue names (one SMEMBERS), keeps those matching the search, orders them and
reads the rows in view only (one pipeline, see ``gateway.store.overview``). Ordering by name
needs nothing more. Ordering by a state's size needs every matching queue's size: those come
from a summary: every queue's number of tasks in that state, read in one round trip (one
script call on a single Redis) and kept for :data:`SUMMARY_MAX_AGE_MS`, shared by every viewer
of this gateway; so a page sorted by depth is in an order at most that old, while the rows it
shows are read fresh.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from enum import StrEnum

from gateway.services.activity import Throughput
from gateway.store.clock import Clock
from gateway.store.overview import COUNTED_STATES, OverviewStore, QueueGlance
from gateway.store.records import to_datetime
from sdk.wire import TaskState

SUMMARY_MAX_AGE_MS = 10_000


class QueueSort(StrEnum):
    """What the queues can be ordered by: the name, or the number of tasks in a state."""

    NAME = "name"
    SCHEDULED = "scheduled"
    WAITING = "waiting"
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    DEAD = "dead"
    CANCELLED = "cancelled"


@dataclass(frozen=True, slots=True)
class QueueRow:
    """One queue in view: its sizes, and its throughput when asked for."""

    name: str
    paused: bool
    counts: dict[TaskState, int]
    throughput: Throughput | None


@dataclass(frozen=True, slots=True)
class QueuePage:
    rows: list[QueueRow]
    offset: int
    matched: int  # queues matching the search
    total: int  # queues registered
    summary_age_ms: int | None  # age of the sizes the order came from; None: sorted by name


@dataclass(frozen=True, slots=True)
class _Summary:
    at_ms: int
    sizes: dict[str, int]  # queue name → tasks in the summary's state


def matching(names: list[str], search: str | None) -> list[str]:
    """The names containing ``search`` (any case), all when there is none."""
    if not search:
        return names
    wanted = search.casefold()
    return [n for n in names if wanted in n.casefold()]


class OverviewService:
    def __init__(self, store: OverviewStore, clock: Clock) -> None:
        self._store = store
        self._clock = clock
        self._summaries: dict[TaskState, _Summary] = {}
        self._building = asyncio.Lock()

    async def page(
        self,
        *,
        search: str | None,
        sort: QueueSort,
        descending: bool,
        offset: int,
        limit: int,
        windows: int = 10,
        window_seconds: int = 60,
    ) -> QueuePage:
        """One page of the queues matching ``search``, in the order asked for, with each
        row's finished tasks in ``windows`` windows of ``window_seconds`` (none for 0)."""
        every = await self._store.names()
        names = matching(every, search)
        age = None
        if sort is QueueSort.NAME:
            names.sort(reverse=descending)
        else:
            state = TaskState(sort.value)
            summary = await self._summary_of(state)
            age = self._clock.now_ms() - summary.at_ms
            # Names the summary has not seen yet (registered since) count as empty.
            sign = -1 if descending else 1
            names.sort(key=lambda n: (sign * summary.sizes.get(n, 0), n))
        now = self._clock.now_ms()
        step = window_seconds * 1000
        edges = [now - (windows - i) * step + 1 for i in range(windows + 1)] if windows else []
        shown = names[offset : offset + limit]
        glances = await self._store.glance(shown, edges)
        rows = [_row(g, edges, window_seconds, now) for g in glances]
        return QueuePage(rows, offset, len(names), len(every), age)

    async def suggest(self, text: str | None, limit: int) -> list[str]:
        """Up to ``limit`` queue names containing ``text``, those starting with it first."""
        found = matching(await self._store.names(), text)
        wanted = (text or "").casefold()
        found.sort(key=lambda n: (not n.casefold().startswith(wanted), n))
        return found[:limit]

    async def first(self) -> str | None:
        """The first queue name in order, None when there are no queues."""
        return min(await self._store.names(), default=None)

    async def total(self, state: TaskState, queue: str | None = None) -> int:
        """Tasks in ``state``: in one queue counted now (one ``ZCARD``), in every queue from
        the shared summary (up to 10 s old; read again once for every viewer when older)."""
        if queue is not None:
            return sum(await self._store.sizes([queue], state))
        return sum((await self._summary_of(state)).sizes.values())

    async def _summary_of(self, state: TaskState) -> _Summary:
        """Every queue's number of tasks in ``state``, read again when older than
        SUMMARY_MAX_AGE_MS (once, however many viewers ask meanwhile)."""
        async with self._building:
            now = self._clock.now_ms()
            found = self._summaries.get(state)
            if found is None or now - found.at_ms > SUMMARY_MAX_AGE_MS:
                names = await self._store.names()
                sizes = await self._store.sizes(names, state)
                found = self._summaries[state] = _Summary(now, dict(zip(names, sizes, strict=True)))
            return found


def _row(glance: QueueGlance, edges: list[int], window_seconds: int, now_ms: int) -> QueueRow:
    throughput = None
    if edges:
        throughput = Throughput(
            queue=glance.name,
            window_seconds=window_seconds,
            until=to_datetime(now_ms),
            finished=glance.finished,
        )
    return QueueRow(glance.name, glance.paused, glance.counts, throughput)


__all__ = ["COUNTED_STATES", "OverviewService", "QueuePage", "QueueRow", "QueueSort", "matching"]
