"""Reading tasks: records, pages by state, counts and logs; nothing here changes state."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any, NamedTuple, cast

from gateway.store import index, keys
from gateway.store.keys import QueueKeys
from gateway.store.records import load_record
from gateway.store.tasks.base import StoreBase
from sdk.wire import TaskState


class PageRow(NamedTuple):
    """One task of a page: its id, record, payload JSON and result JSON (succeeded only)."""

    task_id: str
    record: dict[str, Any]
    payload: str | None
    result: str | None


class LogSlice(NamedTuple):
    """Some log lines of a task (JSON each), with how many earlier ones were dropped (also the
    number of the first line kept) and how many are kept."""

    dropped: int
    kept: int
    lines: list[str]


class Reading(StoreBase):
    """Read-only views of tasks."""

    async def locate(self, task_id: str) -> str | None:
        """The queue of a task, or None."""
        return await index.locate(self._redis, task_id)

    async def record(self, queue: str, task_id: str) -> dict[str, Any] | None:
        raw = await self._redis.hget(QueueKeys.of(queue).meta, task_id)
        return None if raw is None else load_record(raw)

    async def read(
        self, queue: str, task_id: str
    ) -> tuple[dict[str, Any], str | None, str | None, str | None, list[str]] | None:
        """A task's record, payload, result, checkpoint and finished attempts (oldest first)."""
        k = QueueKeys.of(queue)
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.hget(k.meta, task_id)
            pipe.hget(k.payload, task_id)
            pipe.hget(k.result, task_id)
            pipe.hget(k.checkpoint, task_id)
            raw, payload, result, checkpoint = await pipe.execute()
        if raw is None:
            return None
        record = load_record(raw)
        history: list[str] = []
        if record.get("hist"):
            fields = [f"{task_id}:{n}" for n in range(1, record["hist"] + 1)]
            found = cast(list[str | None], await self._redis.hmget(k.attempts, fields))
            history = [a for a in found if a is not None]
        return record, payload, result, checkpoint, history

    async def steps(self, queue: str, task_id: str) -> str | None:
        """The JSON list of a task's durable steps (step.lua), if it has recorded any."""
        return cast(str | None, await self._redis.hget(QueueKeys.of(queue).steps, task_id))

    async def page(
        self, queue: str, state: TaskState, offset: int, limit: int
    ) -> tuple[list[PageRow], bool]:
        """Records and payloads of tasks in ``state``, in the order they will run or ended; for
        succeeded tasks their results too (one HMGET for the page)."""
        k = QueueKeys.of(queue)
        index = {
            TaskState.QUEUED: k.ready,
            TaskState.SCHEDULED: k.scheduled,
            TaskState.RUNNING: k.running,
            TaskState.WAITING: k.waiting,
        }.get(state)
        if index is None and state.finished:
            index = k.finished(state)
        if index is None:
            return [], False
        members = cast(list[str], await self._redis.zrange(index, offset, offset + limit))
        more = len(members) > limit
        ids = [m[-26:] if state is TaskState.QUEUED else m for m in members[:limit]]
        if not ids:
            return [], False
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.hmget(k.meta, ids)
            pipe.hmget(k.payload, ids)
            if state is TaskState.SUCCEEDED:  # only a success stores a result
                pipe.hmget(k.result, ids)
            records, payloads, *found = await pipe.execute()
        results = found[0] if found else [None] * len(ids)
        rows = [
            PageRow(i, load_record(r), p, res)
            for i, r, p, res in zip(ids, records, payloads, results, strict=True)
            if r is not None
        ]
        return rows, more

    async def counts(self, queue: str) -> dict[TaskState, int]:
        k = QueueKeys.of(queue)
        indexes = {
            TaskState.SCHEDULED: k.scheduled,
            TaskState.QUEUED: k.ready,
            TaskState.RUNNING: k.running,
            TaskState.WAITING: k.waiting,
            **{s: k.finished(s) for s in keys.FINISHED_STATES},
        }
        async with self._redis.pipeline(transaction=False) as pipe:
            for index in indexes.values():
                pipe.zcard(index)
            sizes = await pipe.execute()
        return dict(zip(indexes, sizes, strict=True))

    async def unroutable(self, queue: str, covered: set[str]) -> dict[str, int]:
        """Queued tasks per required capability that no endpoint in ``covered`` offers."""
        k = QueueKeys.of(queue)
        missing = sorted(set(cast(set[str], await self._redis.smembers(k.capabilities))) - covered)
        if not missing:
            return {}
        async with self._redis.pipeline(transaction=False) as pipe:
            for cap in missing:
                pipe.zlexcount(k.ready, f"[{cap}/", f"({cap}0")
            sizes = await pipe.execute()
        return {cap: n for cap, n in zip(missing, sizes, strict=True) if n}

    async def logs(self, queue: str, task_id: str) -> list[str]:
        return cast(list[str], await self._redis.lrange(QueueKeys.of(queue).log(task_id), 0, -1))

    async def finished_between(
        self, queue: str, edges: Sequence[int]
    ) -> dict[TaskState, list[int]]:
        """How many tasks ended in each finished state within each window ``[edges[i],
        edges[i+1])`` (ms): one ZCOUNT per state and window on the ``done:<state>`` indexes,
        whose scores are finish times, so the cost does not grow with the queue."""
        k = QueueKeys.of(queue)
        windows = list(itertools.pairwise(edges))
        async with self._redis.pipeline(transaction=False) as pipe:
            for state in keys.FINISHED_STATES:
                for start, end in windows:
                    pipe.zcount(k.finished(state), start, f"({end}")
            counts = await pipe.execute()
        n = len(windows)
        return {
            state: [int(c) for c in counts[i * n : (i + 1) * n]]
            for i, state in enumerate(keys.FINISHED_STATES)
        }

    async def log_page(self, queue: str, task_id: str, first: int, count: int) -> LogSlice | None:
        """Up to ``count`` log lines from line number ``first`` (numbered from the task's first
        line, dropped ones included); None when there is no such task."""
        k = QueueKeys.of(queue)
        reply = await self._scripts.call(
            "log_page", [k.meta, k.log(task_id)], [task_id, first, count]
        )
        if reply[0] != "OK":
            return None
        _, dropped, kept, *lines = reply
        return LogSlice(int(dropped), int(kept), lines)
