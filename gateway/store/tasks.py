"""Tasks in Redis: every state change is one script of ``lua/``; this module only calls them.

The Redis client must decode responses (``decode_responses=True``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, cast

from redis.asyncio import Redis

from gateway.errors import FieldProblem, QueueNotFound, TaskExists, ValidationFailed
from gateway.store import keys
from gateway.store.keys import QueueKeys
from gateway.store.records import Lease, NewTask
from gateway.store.scripts import Scripts
from sdk.wire import AttemptOutcome, TaskState

LOG_LINES_KEPT = 1000


class ClaimStatus(StrEnum):
    OK = "OK"
    NOQUEUE = "NOQUEUE"
    PAUSED = "PAUSED"
    FULL = "FULL"
    EMPTY = "EMPTY"
    NOENDPOINT = "NOENDPOINT"
    RATE = "RATE"


@dataclass(frozen=True, slots=True)
class Claim:
    status: ClaimStatus
    leases: list[Lease]
    retry_at_ms: int | None = None  # RATE, or NOENDPOINT with an open circuit: when to try again


class Fence(StrEnum):
    """How a lease-fenced change went."""

    OK = "OK"
    NOTASK = "NOTASK"  # no such task
    STALE = "STALE"  # the token is not the current lease: nothing changed
    ALIVE = "ALIVE"  # an expiry found the lease extended meanwhile: nothing changed


@dataclass(frozen=True, slots=True)
class Heartbeat:
    fence: Fence
    cancel_requested: bool = False
    expires_ms: int = 0
    state: TaskState | None = None


@dataclass(frozen=True, slots=True)
class Finish:
    """One attempt's end, as the dispatcher or a callback reports it."""

    task_id: str
    token: str
    outcome: AttemptOutcome
    http_status: int | None = None
    text: str = ""  # the result JSON when succeeded, else the error text
    traceback: str = ""
    delay_ms: int = 0  # before the retry, when there is one


@dataclass(frozen=True, slots=True)
class Finished:
    fence: Fence
    state: TaskState | None = None
    due_ms: int | None = None


class CancelResult(StrEnum):
    CANCELLED = "CANCELLED"
    REQUESTED = "REQUESTED"
    FINISHED = "FINISHED"
    NOTASK = "NOTASK"


@dataclass(frozen=True, slots=True)
class Expired:
    """A running task whose lease has run out, as read before its expiry is recorded."""

    task_id: str
    token: str
    attempt: int
    max_attempts: int | None


def _finish_keys(k: QueueKeys) -> list[str]:
    return [
        k.policy,
        k.meta,
        k.result,
        k.attempts,
        k.running,
        k.inflight,
        k.ready,
        k.scheduled,
        k.seq,
        k.endpoints,
        k.succeeded,
        k.failed,
        k.dead,
        k.cancelled,
        k.waiting,
        k.dependents,
        k.groups,
        k.outbox,
        k.stalls,
    ]


def _enqueue_keys(k: QueueKeys) -> list[str]:
    return [
        k.policy,
        k.meta,
        k.payload,
        k.ready,
        k.scheduled,
        k.seq,
        k.waiting,
        k.dependents,
        k.groups,
        k.outbox,
        k.failed,
        k.dead,
        k.dedup,
        k.dedup_exp,
        k.singleton,
        k.capabilities,
        k.links,
    ]


@dataclass(frozen=True, slots=True)
class Stored:
    """How one task of an enqueue went: stored in ``state``, or matched the earlier task
    ``duplicate_of`` by its dedup or singleton key (then nothing was stored for it)."""

    state: TaskState | None
    duplicate_of: str | None = None


def _stored(entry: str) -> Stored:
    if entry.startswith("dup:"):
        return Stored(None, entry.removeprefix("dup:"))
    return Stored(TaskState(entry))


def _finish_args(f: Finish) -> list[str | int]:
    return [
        f.task_id,
        f.token,
        f.outcome.value,
        "" if f.http_status is None else f.http_status,
        f.text,
        f.traceback,
        f.delay_ms,
    ]


def _finished(reply: list[Any]) -> Finished:
    fence = Fence(reply[0])
    if fence is Fence.OK:
        return Finished(fence, TaskState(reply[1]), int(reply[2]) if reply[2] else None)
    if fence is Fence.STALE:
        return Finished(fence, TaskState(reply[1]))
    return Finished(fence)


class TaskStore:
    """Atomic task state changes of every queue."""

    def __init__(self, redis: Redis, scripts: Scripts) -> None:
        self._redis = redis
        self._scripts = scripts

    async def enqueue(
        self, queue: str, tasks: Sequence[NewTask], now_ms: int, *, client_ids: bool = False
    ) -> list[Stored]:
        """Store tasks atomically; raises QueueNotFound or TaskExists and then stores nothing.

        The id index lives outside the queue's slot. Ids the gateway made are unique, so their
        index entries ride in the script's round trip; ids a client chose are claimed in the
        index first, so one already used in another queue is refused before anything is stored.
        """
        k = QueueKeys.of(queue)
        args: list[str | int] = [now_ms, queue, keys.WAKE_CHANNEL, keys.DONE_CHANNEL_PREFIX]
        for t in tasks:
            args += [t.id, t.record_json(), t.payload_json]
        script_keys = _enqueue_keys(k)
        index = [keys.task_index(t.id) for t in tasks]
        if client_ids:
            indexed = await self._claim_index(queue, index)
            reply = await self._scripts.call("enqueue", script_keys, args)
        else:
            indexed = index
            async with self._redis.pipeline(transaction=False) as pipe:
                for key in index:
                    pipe.set(key, queue)
                pipe.evalsha(self._scripts.sha("enqueue"), len(script_keys), *script_keys, *args)
                *_, reply = await pipe.execute(raise_on_error=False)
            if isinstance(reply, Exception):
                reply = await self._scripts.call("enqueue", script_keys, args)
        if reply[0] == "OK":
            stored = [_stored(entry) for entry in reply[1:]]
            unused = [
                key for key, s in zip(index, stored, strict=True) if s.duplicate_of is not None
            ]
            if unused:
                await self._redis.delete(*unused)
            return stored
        if indexed:
            await self._redis.delete(*indexed)
        if reply[0] == "NOQUEUE":
            raise QueueNotFound(queue)
        if reply[0] == "NOGROUP":
            raise ValidationFailed(
                [
                    FieldProblem(
                        f"tasks.{reply[1]}.after_group",
                        f"no task of queue '{queue}' has joined group '{reply[2]}'",
                    )
                ]
            )
        if reply[0] == "NODEP":
            raise ValidationFailed(
                [FieldProblem(f"tasks.{reply[1]}.depends_on", f"no task '{reply[2]}' exists")]
            )
        raise TaskExists(reply[1])

    async def _claim_index(self, queue: str, index: list[str]) -> list[str]:
        """Point index entries at ``queue``; returns those set now. Raises TaskExists when one
        points at another queue already."""
        async with self._redis.pipeline(transaction=False) as pipe:
            for key in index:
                pipe.set(key, queue, nx=True)
            fresh = await pipe.execute()
        new = [key for key, ok in zip(index, fresh, strict=True) if ok]
        taken = [key for key, ok in zip(index, fresh, strict=True) if not ok]
        if taken:
            owners = await self._redis.mget(taken)
            foreign = [key for key, owner in zip(taken, owners, strict=True) if owner != queue]
            if foreign:
                if new:
                    await self._redis.delete(*new)
                raise TaskExists(foreign[0].removeprefix(keys.task_index("")))
        return new

    async def locate(self, task_id: str) -> str | None:
        """The queue of a task, or None."""
        return cast(str | None, await self._redis.get(keys.task_index(task_id)))

    async def record(self, queue: str, task_id: str) -> dict[str, Any] | None:
        raw = await self._redis.hget(QueueKeys.of(queue).meta, task_id)
        return None if raw is None else dict(json.loads(raw))

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
        record: dict[str, Any] = json.loads(raw)
        history: list[str] = []
        if record.get("hist"):
            fields = [f"{task_id}:{n}" for n in range(1, record["hist"] + 1)]
            found = cast(list[str | None], await self._redis.hmget(k.attempts, fields))
            history = [a for a in found if a is not None]
        return record, payload, result, checkpoint, history

    async def page(
        self, queue: str, state: TaskState, offset: int, limit: int
    ) -> tuple[list[tuple[str, dict[str, Any], str | None]], bool]:
        """Records and payloads of tasks in ``state``, in the order they will run or ended."""
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
            records, payloads = await pipe.execute()
        rows = [
            (i, json.loads(r), p)
            for i, r, p in zip(ids, records, payloads, strict=True)
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

    async def claim(self, queue: str, count: int, seed: str, now_ms: int) -> Claim:
        """Lease up to ``count`` ready tasks; ``seed`` (secret, random, fresh for every call)
        is what the script derives their lease tokens from."""
        k = QueueKeys.of(queue)
        reply = await self._scripts.call(
            "claim",
            [
                k.policy,
                k.meta,
                k.payload,
                k.checkpoint,
                k.running,
                k.endpoints,
                k.inflight,
                k.ready,
                k.singleton,
                k.stalls,
            ],
            [now_ms, count, seed],
        )
        status = ClaimStatus(reply[0])
        if status is ClaimStatus.RATE:
            return Claim(status, [], now_ms + int(reply[1]))
        if status is ClaimStatus.NOENDPOINT:
            return Claim(status, [], int(reply[1]) if reply[1] else None)
        leases = []
        for task_id, endpoint_id, raw, payload, checkpoint in reply[1:]:
            record = json.loads(raw)
            leases.append(
                Lease(
                    queue=queue,
                    task_id=task_id,
                    endpoint_id=endpoint_id,
                    token=record["lease"],
                    name=record["name"],
                    attempt=record["att"],
                    max_attempts=record.get("max_att"),
                    payload_json=payload if payload is not None else "null",
                    checkpoint_json=checkpoint,
                    expires_ms=int(record["exp"]),
                    deadline_ms=int(record["deadline"]),
                    traceparent=record.get("tp"),
                )
            )
        return Claim(status, leases)

    async def heartbeat(
        self,
        queue: str,
        task_id: str,
        token: str,
        now_ms: int,
        *,
        extend_ms: int | None = None,
        progress: float | None = None,
        checkpoint_json: str | None = None,
    ) -> Heartbeat:
        k = QueueKeys.of(queue)
        reply = await self._scripts.call(
            "heartbeat",
            [k.policy, k.meta, k.running, k.checkpoint, k.stalls],
            [
                task_id,
                token,
                now_ms,
                "" if extend_ms is None else extend_ms,
                "" if progress is None else repr(progress),
                "" if checkpoint_json is None else checkpoint_json,
            ],
        )
        fence = Fence(reply[0])
        if fence is Fence.OK:
            return Heartbeat(fence, bool(reply[1]), int(reply[2]))
        if fence is Fence.STALE:
            return Heartbeat(fence, state=TaskState(reply[1]))
        return Heartbeat(fence)

    async def append_log(
        self, queue: str, task_id: str, token: str, lines: Sequence[str], keep_ms: int
    ) -> Fence:
        k = QueueKeys.of(queue)
        reply = await self._scripts.call(
            "append_log",
            [k.meta, k.log(task_id)],
            [task_id, token, LOG_LINES_KEPT, keep_ms, *lines],
        )
        return Fence(reply[0])

    async def logs(self, queue: str, task_id: str) -> list[str]:
        return cast(list[str], await self._redis.lrange(QueueKeys.of(queue).log(task_id), 0, -1))

    async def finish(self, queue: str, finish: Finish, now_ms: int) -> Finished:
        (done,) = await self.finish_many(queue, [finish], now_ms)
        return done

    async def finish_many(
        self, queue: str, finishes: Sequence[Finish], now_ms: int
    ) -> list[Finished]:
        """End many attempts of one queue in one script call; each end is decided on its own
        (fenced by its own token), so one stale lease does not stop the others."""
        if not finishes:
            return []
        args: list[str | int] = [now_ms, keys.DONE_CHANNEL_PREFIX, queue]
        for f in finishes:
            args += _finish_args(f)
        replies = await self._scripts.call("finish", _finish_keys(QueueKeys.of(queue)), args)
        return [_finished(reply) for reply in replies]

    async def cancel(self, queue: str, task_id: str, now_ms: int) -> CancelResult:
        k = QueueKeys.of(queue)
        reply = await self._scripts.call(
            "cancel",
            [
                k.meta,
                k.ready,
                k.scheduled,
                k.cancelled,
                k.policy,
                k.seq,
                k.waiting,
                k.dependents,
                k.groups,
                k.outbox,
                k.failed,
                k.dead,
            ],
            [task_id, now_ms, keys.DONE_CHANNEL_PREFIX, queue],
        )
        return CancelResult(reply[0])

    async def promote(self, queue: str, now_ms: int, limit: int) -> int:
        """Move due scheduled tasks to the ready set; returns how many moved."""
        k = QueueKeys.of(queue)
        moved: int = await self._scripts.call(
            "promote",
            [k.meta, k.scheduled, k.ready, k.seq],
            [now_ms, limit, keys.WAKE_CHANNEL, queue],
        )
        return moved

    async def expired(self, queue: str, now_ms: int, limit: int) -> list[Expired]:
        """Running tasks whose lease ran out by ``now_ms`` (read only; finish() records it)."""
        k = QueueKeys.of(queue)
        ids = cast(list[str], await self._redis.zrangebyscore(k.running, "-inf", now_ms, 0, limit))
        return await self._running(k, ids)

    async def stalled(self, queue: str, now_ms: int, limit: int) -> list[Expired]:
        """Running tasks silent past their heartbeat interval by ``now_ms`` (read only)."""
        k = QueueKeys.of(queue)
        ids = cast(list[str], await self._redis.zrangebyscore(k.stalls, "-inf", now_ms, 0, limit))
        return await self._running(k, ids)

    async def _running(self, k: QueueKeys, ids: list[str]) -> list[Expired]:
        if not ids:
            return []
        found = []
        for task_id, raw in zip(ids, await self._redis.hmget(k.meta, ids), strict=True):
            if raw is None:
                continue
            record = json.loads(raw)
            if record.get("state") == TaskState.RUNNING and "lease" in record:
                found.append(
                    Expired(task_id, record["lease"], record["att"], record.get("max_att"))
                )
        return found

    async def sweep(self, queue: str, now_ms: int, limit: int) -> int:
        """Delete finished tasks past their retention; returns how many."""
        k = QueueKeys.of(queue)
        ids: list[str] = await self._scripts.call(
            "sweep",
            [
                k.policy,
                k.meta,
                k.payload,
                k.result,
                k.checkpoint,
                k.attempts,
                k.succeeded,
                k.failed,
                k.dead,
                k.cancelled,
                k.dedup,
                k.dedup_exp,
            ],
            [now_ms, limit],
        )
        await self.forget(queue, ids)
        return len(ids)

    async def forget(self, queue: str, task_ids: Sequence[str]) -> None:
        """Delete the index entries and log lists of tasks that are gone."""
        k = QueueKeys.of(queue)
        for start in range(0, len(task_ids), 500):
            chunk = task_ids[start : start + 500]
            async with self._redis.pipeline(transaction=False) as pipe:
                for task_id in chunk:
                    pipe.delete(keys.task_index(task_id))
                    pipe.delete(k.log(task_id))
                await pipe.execute()
