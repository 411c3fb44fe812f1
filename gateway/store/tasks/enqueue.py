"""Storing new tasks: one enqueue script per batch, and the id index beside it."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from redis.asyncio.cluster import RedisCluster
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError
from redis.exceptions import TimeoutError as RedisTimeoutError

from gateway.core.errors import FieldProblem, QueueNotFound, TaskExists, ValidationFailed
from gateway.store import keys
from gateway.store.coalescing import Command, Packed, Word, unpacked
from gateway.store.index import by_bucket
from gateway.store.keys import QueueKeys
from gateway.store.notices import mark as mark_noticed
from gateway.store.records import NewTask, load_record
from gateway.store.scripts import Reply
from gateway.store.tasks.base import StoreBase
from gateway.store.tasks.leases import Carried, ClaimOrder
from sdk.wire import TaskState


@functools.lru_cache(maxsize=4096)
def _enqueue_keys(queue: str) -> Packed:
    """The enqueue script's keys for ``queue``, packed once."""
    k = QueueKeys.of(queue)
    return Packed.of(
        (
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
            k.notify,
            k.key_counts,
        )
    )


@dataclass(frozen=True, slots=True)
class Replaced:
    """A debounced enqueue merged into the pending task ``id``: it is the burst's ``seq``-th
    enqueue, and the task (created at ``created_ms``) now runs at ``run_at_ms`` in ``state``.
    ``record``: the task's record as the script stored it (``load_record``'s), all but its
    payload (this enqueue's) and its history (none: it has not run)."""

    id: str
    seq: int
    run_at_ms: int
    created_ms: int
    state: TaskState
    record: dict[str, Any] = field(default_factory=dict, compare=False)

    @classmethod
    def of(cls, task_id: str, raw: str) -> Replaced:
        record = load_record(raw)
        state = TaskState(record["state"])
        return cls(task_id, record["dbn"], record["run_at"], record["created"], state, record)


@dataclass(frozen=True, slots=True)
class Stored:
    """How one task of an enqueue went: stored in ``state``, or matched the earlier task
    ``duplicate_of`` by its dedup or singleton key (then nothing was stored for it).

    Debounce and throttle: ``replaced`` when a debounced enqueue merged into a pending task;
    ``dropped_for`` when a throttle dropped it (the last task its window let through, '' when
    none is known; nothing stored); ``delayed_to`` (ms) when a throttle stored it to run in a
    later window.

    ``record``: for a task stored with dependencies, its record as the script left it
    (``load_record``'s): the script decided its state, wait list and depends_on (a member
    matched to an earlier task names that task), and may have ended it."""

    state: TaskState | None
    duplicate_of: str | None = None
    replaced: Replaced | None = None
    dropped_for: str | None = None
    delayed_to: int | None = None
    record: dict[str, Any] | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class Enqueued:
    """How an enqueue went: each task's :class:`Stored`, and whether the script told the wake
    channel of its new ready tasks (then every gateway, this one included, hears of them)."""

    stored: list[Stored]
    announced: bool


_PLAIN = {state.value: Stored(state) for state in TaskState}


def _stored(entry: str) -> Stored:
    plain = _PLAIN.get(entry)
    if plain is not None:
        return plain
    kind, _, rest = entry.partition(":")
    if kind == "dup":
        return Stored(None, rest)
    if kind == "rep":
        holder, _, raw = rest.partition(" ")
        return Stored(None, replaced=Replaced.of(holder, raw))
    if kind == "rec":
        record = load_record(rest)
        return Stored(TaskState(record["state"]), record=record)
    if kind == "thr":
        return Stored(None, dropped_for=rest)
    state, run_at = rest.split(" ")  # "dly"
    return Stored(TaskState(state), delayed_to=int(run_at))


def _as_found(record: dict[str, Any]) -> Stored:
    """The outcome of a task found stored: its record (the answer is built from it, as the
    script may have changed it since), and ``delayed_to`` when its throttle delayed it."""
    state = TaskState(record["state"])
    return Stored(state, delayed_to=record["run_at"] if "thd" in record else None, record=record)


def _flow_key(queue: str, t: NewTask) -> str:
    """The key of a task's debounce or throttle option (lua/enqueue.lua, KEYS[20..])."""
    k = QueueKeys.of(queue)
    if t.debounce is not None:
        return k.debounce(t.name, t.debounce[0])
    assert t.throttle is not None
    return k.throttle(t.name, t.throttle[0])


Entry = tuple[str, str]
"""An index entry: the bucket (:func:`gateway.store.keys.task_index`) and the task id."""


def _task_words(tasks: Sequence[NewTask]) -> Packed:
    """The enqueue script's three arguments per task (id, record JSON, payload JSON), packed
    in RESP here at one format per task: :func:`gateway.store.coalescing.pack` takes a word
    at a time (a type test, an encode, a format each), about 2 µs per task of a batch."""
    words: list[str] = []
    resp: list[bytes] = []
    for t in tasks:
        record = t.record_json()
        words += (t.id, record, t.payload_json)
        i, r, p = t.id.encode(), record.encode(), t.payload_json.encode()
        resp.append(b"$%d\r\n%b\r\n$%d\r\n%b\r\n$%d\r\n%b\r\n" % (len(i), i, len(r), r, len(p), p))
    return Packed(tuple(words), b"".join(resp))


def _index_words(index: list[Entry], queue: str) -> Packed:
    """The index script's keys (every task's bucket) and arguments (the queue, every id),
    packed in RESP at one format per task (as :func:`_task_words`)."""
    buckets = [bucket for bucket, _ in index]
    ids = [task_id for _, task_id in index]
    q = queue.encode()
    resp = [b"$%d\r\n%b\r\n" % (len(b), b) for b in map(str.encode, buckets)]
    resp.append(b"$%d\r\n%b\r\n" % (len(q), q))
    resp += [b"$%d\r\n%b\r\n" % (len(i), i) for i in map(str.encode, ids)]
    return Packed((*buckets, queue, *ids), b"".join(resp))


def _set_each(pipe: Any, queue: str, index: list[Entry]) -> None:
    """Index entries pointing at ``queue``, one HSET each, into ``pipe``."""
    for bucket, task_id in index:
        pipe.hset(bucket, task_id, queue)


async def _unindex(redis: Any, entries: list[Entry]) -> None:
    """Delete index entries written for tasks that were not stored."""
    async with redis.pipeline(transaction=False) as pipe:
        for bucket, ids in by_bucket(task_id for _, task_id in entries).items():
            pipe.hdel(bucket, *ids)
        await pipe.execute()


class Enqueuing(StoreBase):
    """Stores new tasks, all of a batch or none."""

    async def enqueue(
        self, queue: str, tasks: Sequence[NewTask], now_ms: int, *, client_ids: bool = False
    ) -> list[Stored]:
        """:meth:`enqueue_batch`, each task's outcome only."""
        return (await self.enqueue_batch(queue, tasks, now_ms, client_ids=client_ids)).stored

    async def enqueue_batch(
        self,
        queue: str,
        tasks: Sequence[NewTask],
        now_ms: int,
        *,
        client_ids: bool = False,
        claim: ClaimOrder | None = None,
    ) -> Enqueued:
        """Store tasks atomically; raises QueueNotFound or TaskExists and then stores nothing.

        The id index lives outside the queue's slot. Ids the gateway made are unique, so their
        index entries ride in the script's round trip; ids a client chose are claimed in the
        index first, so one already used in another queue is refused before anything is stored.

        ``claim``: a push claim run right after the enqueue script in the same round trip (a
        script of its own: the claim's rules are the claim script's), handed to its ``take``
        whatever the enqueue's outcome.
        """
        order = Carried(queue, claim)
        try:
            args: list[Word] = [now_ms, queue, keys.WAKE_CHANNEL, keys.DONE_CHANNEL_PREFIX]
            args += (_task_words(tasks), self._origin)
            flows = [
                _flow_key(queue, t)
                for t in tasks
                if t.debounce is not None or t.throttle is not None
            ]
            script_keys = _enqueue_keys(queue)
            if flows:
                script_keys = Packed.of((*script_keys.words, *flows))
            index = [(keys.task_index(t.id), t.id) for t in tasks]
            if client_ids:
                indexed = await self._claim_index(queue, index)
                reply, confirmed = await self._store(queue, script_keys, args, [], order)
            else:
                indexed = index
                reply, confirmed = await self._store(queue, script_keys, args, index, order)
        finally:
            order.unanswered()
        if reply[0] == "OK":
            entries = reply[1 : len(tasks) + 1]
            markers = reply[len(tasks) + 1 :]
            if "NOTICE" in markers:  # a completion callback notice was recorded
                await mark_noticed(self._redis, queue, now_ms)
            stored = [_stored(entry) for entry in entries]
            unused = [e for e, s in zip(index, stored, strict=True) if s.state is None]
            if unused:
                await _unindex(self._redis, unused)
            if confirmed is not None:
                self._durability.confirm(confirmed)
            return Enqueued(stored, "WOKE" in markers)
        if reply[0] == "EXISTS" and not client_ids:
            earlier = await self._stored_before(queue, tasks)
            if earlier is not None:
                return Enqueued(earlier, announced=False)
        if indexed:
            await _unindex(self._redis, indexed)
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

    async def _stored_before(self, queue: str, tasks: Sequence[NewTask]) -> list[Stored] | None:
        """Each task's state when every one is stored already, else None. Ids the gateway made
        are unique, so such tasks are this enqueue's own: an earlier run of the script whose
        answer was lost and which the client sent again (redis-py's cluster pipeline re-sends
        a command that met a failover)."""
        raws: list[bytes | str | None] = await self._redis.hmget(
            QueueKeys.of(queue).meta, [t.id for t in tasks]
        )
        found = [load_record(raw) for raw in raws if raw is not None]
        if len(found) < len(tasks):
            return None
        return [_as_found(record) for record in found]

    async def _store(
        self,
        queue: str,
        script_keys: Packed,
        args: list[Word],
        index: list[Entry],
        order: Carried,
    ) -> tuple[Reply, int | None]:
        """Run the enqueue script, with the index entries ``index`` set
        before it and the claim ``order`` asks for after it, in the same round trip. Returns its
        reply and, when replicas must confirm, how many did."""
        indexed, reply, claimed, confirmed = await self._pipeline(
            queue, script_keys, args, index, order
        )
        await order.hand_over(self._scripts, self._redis, claimed)
        if isinstance(reply, NoScriptError):
            await self._scripts.load()  # Redis restarted or failed over: load, run again
            indexed, reply, claimed, confirmed = await self._pipeline(
                queue, script_keys, args, index, order
            )
            await order.hand_over(self._scripts, self._redis, claimed)
        elif isinstance(indexed, NoScriptError):  # scripts flushed between the two commands
            await self._scripts.load()
            await self._set_index(queue, index)
        for answer in (reply, confirmed):
            if isinstance(answer, Exception):
                raise answer
        return await self._scripts.unwrap("enqueue", script_keys.words, reply), confirmed

    async def _pipeline(
        self,
        queue: str,
        script_keys: Packed,
        args: list[Word],
        index: list[Entry],
        order: Carried,
    ) -> tuple[Reply, Reply, Reply, Reply]:
        """One round trip: the index entries, the script, the claim
        script when ``order`` still asks for it, and ``WAIT`` when replicas must confirm (on the
        connection that wrote, as WAIT requires). Returns the replies of the index script (None
        without it), the enqueue script, the claim (None without it) and WAIT (None without
        it); errors come back as replies.

        On a single Redis the round trip is shared with the enqueues of the same moment
        (:mod:`gateway.store.coalescing`); when its connection fails, it is sent again through
        redis-py's pipeline, which retries (an enqueue whose first answer was lost is read back
        as stored: :meth:`_stored_before`)."""
        one_command = len(index) > 1 and not isinstance(self._redis, RedisCluster)
        commands: list[Command]
        if one_command:  # one script call, not an HSET per task (5x the CPU for a batch)
            sha = self._scripts.sha("index")
            commands = [("EVALSHA", sha, len(index), _index_words(index, queue))]
        else:  # one task; or a cluster, which refuses a script over several slots
            commands = [("HSET", bucket, task_id, queue) for bucket, task_id in index]
        # EVALSHA through execute_command: redis-py's cluster pipeline refuses
        # pipe.evalsha() but routes the command by its first key all the same.
        sha = self._scripts.sha("enqueue")
        commands.append(("EVALSHA", sha, len(script_keys.words), script_keys, *args))
        claim = order.pending
        if claim is not None:
            commands.append(order.command(self._scripts))
        replies = None
        if self._coalescer is not None:
            with contextlib.suppress(RedisConnectionError, RedisTimeoutError):
                replies = await self._coalescer.run(commands)
        if replies is None:
            async with self._redis.pipeline(transaction=False) as pipe:
                for command in commands:
                    pipe.execute_command(*unpacked(command))
                if self._durability.waits:
                    pipe.execute_command(*self._durability.wait_command())
                replies = await pipe.execute(raise_on_error=False)
        indexed = replies[0] if one_command else None
        confirmed = replies.pop() if self._durability.waits else None
        claimed = replies.pop() if claim is not None else None
        return indexed, replies[-1], claimed, confirmed

    async def _set_index(self, queue: str, index: list[Entry]) -> None:
        async with self._redis.pipeline(transaction=False) as pipe:
            _set_each(pipe, queue, index)
            await pipe.execute()

    async def _claim_index(self, queue: str, entries: list[Entry]) -> list[Entry]:
        """Point index entries at ``queue``; returns those set now. Raises TaskExists when one
        points at another queue already, in the index or in the key per task older versions
        wrote."""
        async with self._redis.pipeline(transaction=False) as pipe:
            for bucket, task_id in entries:
                pipe.hsetnx(bucket, task_id, queue)
                pipe.get(keys.legacy_task_index(task_id))
            answers = await pipe.execute()
        fresh, legacy = answers[0::2], answers[1::2]
        new = [e for e, ok in zip(entries, fresh, strict=True) if ok]
        taken = [e for e, ok in zip(entries, fresh, strict=True) if not ok]
        foreign = [
            task_id
            for (_, task_id), owner in zip(entries, legacy, strict=True)
            if owner is not None and owner != queue
        ]
        if taken:
            # HGETs in a pipeline: the buckets of several ids lie in several Cluster slots.
            async with self._redis.pipeline(transaction=False) as pipe:
                for bucket, task_id in taken:
                    pipe.hget(bucket, task_id)
                owners = await pipe.execute()
            foreign += [e[1] for e, owner in zip(taken, owners, strict=True) if owner != queue]
        if foreign:
            if new:
                await _unindex(self._redis, new)
            raise TaskExists(foreign[0])
        return new
