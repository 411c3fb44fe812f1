"""What the enqueue script answered, as Python values: the last step of
:meth:`gateway.store.tasks.enqueue.Enqueuing.enqueue_batch`.

Each task's entry of an ``OK`` reply becomes a :class:`Stored`; a refusal (``NOQUEUE``,
``NOGROUP``, ``NODEP``, ``EXISTS``) becomes the error the API answers with; and an enqueue whose
answer was lost and that ran again is read back as stored (:func:`stored_before`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from redis.asyncio import Redis

from gateway.core.errors import (
    FieldProblem,
    GatewayError,
    QueueNotFound,
    TaskExists,
    ValidationFailed,
)
from gateway.store.keys import QueueKeys
from gateway.store.records import NewTask, load_record
from gateway.store.scripts import Reply
from sdk.wire import TaskState


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


def read_entry(entry: str) -> Stored:
    """One task's entry of an ``OK`` reply (lua/enqueue.lua's header)."""
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


def refusal(queue: str, reply: Reply) -> GatewayError:
    """The error a refused enqueue answers with (the script stored nothing)."""
    if reply[0] == "NOQUEUE":
        return QueueNotFound(queue)
    if reply[0] == "NOGROUP":
        return ValidationFailed(
            [
                FieldProblem(
                    f"tasks.{reply[1]}.after_group",
                    f"no task of queue '{queue}' has joined group '{reply[2]}'",
                )
            ]
        )
    if reply[0] == "NODEP":
        return ValidationFailed(
            [FieldProblem(f"tasks.{reply[1]}.depends_on", f"no task '{reply[2]}' exists")]
        )
    return TaskExists(reply[1])


async def stored_before(redis: Redis, queue: str, tasks: Sequence[NewTask]) -> list[Stored] | None:
    """Each task's state when every one is stored already, else None. Ids the gateway made
    are unique, so such tasks are this enqueue's own: an earlier run of the script whose
    answer was lost and which the client sent again (redis-py's cluster pipeline re-sends
    a command that met a failover)."""
    raws: list[bytes | str | None] = await redis.hmget(
        QueueKeys.of(queue).meta, [t.id for t in tasks]
    )
    found = [load_record(raw) for raw in raws if raw is not None]
    if len(found) < len(tasks):
        return None
    return [_as_found(record) for record in found]


def _as_found(record: dict[str, Any]) -> Stored:
    """The outcome of a task found stored: its record (the answer is built from it, as the
    script may have changed it since), and ``delayed_to`` when its throttle delayed it."""
    state = TaskState(record["state"])
    return Stored(state, delayed_to=record["run_at"] if "thd" in record else None, record=record)
