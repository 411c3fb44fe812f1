"""A queue's keys: :class:`QueueKeys` makes them all, under the queue's hash tag, as the first
table of :mod:`gateway.store.keys` (the key layout) lists them; :func:`queue_hash` and
:func:`state_index` make one alone, for reads over many queues.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from sdk.wire import TaskState

FINISHED_STATES: tuple[TaskState, ...] = (
    TaskState.SUCCEEDED,
    TaskState.FAILED,
    TaskState.DEAD,
    TaskState.CANCELLED,
)


def queue_of(policy_key: str) -> str:
    """The queue whose hash is ``policy_key`` (``jg:{<queue>}:queue``, see QueueKeys.policy)."""
    return policy_key.removeprefix("jg:{").removesuffix("}:queue")


_STATE_INDEX = {
    TaskState.SCHEDULED: "scheduled",
    TaskState.WAITING: "waiting",
    TaskState.QUEUED: "ready",
    TaskState.RUNNING: "running",
    **{s: f"done:{s.value}" for s in FINISHED_STATES},
}


def queue_hash(queue: str) -> str:
    """The queue's own hash (its policy and more): :attr:`QueueKeys.policy`, made alone."""
    return f"jg:{{{queue}}}:queue"


def state_index(queue: str, state: TaskState) -> str:
    """The sorted set of ``queue``'s tasks in ``state``: the key :class:`QueueKeys` names
    ``ready``, ``running``, ``finished(state)``..., made alone. For reads over many queues,
    where making every key of each queue (about 20 µs a queue) would cost more than the read."""
    return f"jg:{{{queue}}}:{_STATE_INDEX[state]}"


@dataclass(frozen=True, slots=True)
class QueueKeys:
    """The keys of one queue, all under its hash tag."""

    queue: str
    policy: str
    seq: str
    meta: str
    payload: str
    result: str
    checkpoint: str
    steps: str
    attempts: str
    ready: str
    scheduled: str
    running: str
    endpoints: str
    inflight: str
    health: str
    succeeded: str
    failed: str
    dead: str
    cancelled: str
    waiting: str
    dependents: str
    groups: str
    outbox: str
    links: str
    dedup: str
    dedup_exp: str
    singleton: str
    capabilities: str
    stalls: str
    catalog: str
    notify: str
    redrive: str
    rates: str
    rates_full: str
    key_counts: str
    waits: str
    wait_shapes: str
    calls: str

    @classmethod
    def of(cls, queue: str) -> QueueKeys:
        """The keys of ``queue``, made once and kept (the last 1,024 queues asked for, about
        3 KB each): they never change, and making them took about 20 µs, twice on a lone
        enqueue's path (bench/RESULTS.md, "Latency: enqueue to start")."""
        return _keys_of(queue)

    @classmethod
    def made(cls, queue: str) -> QueueKeys:
        """The keys of ``queue``, made anew (:meth:`of` keeps them)."""
        p = f"jg:{{{queue}}}:"
        return cls(
            queue=queue,
            policy=p + "queue",
            seq=p + "seq",
            meta=p + "meta",
            payload=p + "payload",
            result=p + "result",
            checkpoint=p + "checkpoint",
            steps=p + "steps",
            attempts=p + "attempts",
            ready=p + "ready",
            scheduled=p + "scheduled",
            running=p + "running",
            endpoints=p + "endpoints",
            inflight=p + "inflight",
            health=p + "health",
            succeeded=p + "done:succeeded",
            failed=p + "done:failed",
            dead=p + "done:dead",
            cancelled=p + "done:cancelled",
            waiting=p + "waiting",
            dependents=p + "dependents",
            groups=p + "groups",
            outbox=p + "outbox",
            links=p + "links",
            dedup=p + "dedup",
            dedup_exp=p + "dedup_exp",
            singleton=p + "singleton",
            capabilities=p + "capabilities",
            stalls=p + "stalls",
            catalog=p + "catalog",
            notify=p + "notify",
            redrive=p + "redrive",
            rates=p + "rates",
            rates_full=p + "rates_full",
            key_counts=p + "key_counts",
            waits=p + "waits",
            wait_shapes=p + "wait_shapes",
            calls=p + "calls",
        )

    def log(self, task_id: str) -> str:
        return f"jg:{{{self.queue}}}:log:{task_id}"

    def debounce(self, name: str, key: str) -> str:
        """The pending task of a debounce key (names and keys hold no space)."""
        return f"jg:{{{self.queue}}}:debounce:{name} {key}"

    def throttle(self, name: str, key: str) -> str:
        """The current window of a throttle key."""
        return f"jg:{{{self.queue}}}:throttle:{name} {key}"

    def finished(self, state: TaskState) -> str:
        """The index of tasks that ended in ``state``."""
        return {
            TaskState.SUCCEEDED: self.succeeded,
            TaskState.FAILED: self.failed,
            TaskState.DEAD: self.dead,
            TaskState.CANCELLED: self.cancelled,
        }[state]

    def all(self) -> tuple[str, ...]:
        """Every fixed key of the queue (not the per-task log lists)."""
        return (
            self.policy,
            self.seq,
            self.meta,
            self.payload,
            self.result,
            self.checkpoint,
            self.steps,
            self.attempts,
            self.ready,
            self.scheduled,
            self.running,
            self.endpoints,
            self.inflight,
            self.health,
            self.succeeded,
            self.failed,
            self.dead,
            self.cancelled,
            self.waiting,
            self.dependents,
            self.groups,
            self.outbox,
            self.links,
            self.dedup,
            self.dedup_exp,
            self.singleton,
            self.capabilities,
            self.stalls,
            self.catalog,
            self.notify,
            self.redrive,
            self.rates,
            self.rates_full,
            self.key_counts,
            self.waits,
            self.wait_shapes,
            self.calls,
        )


@functools.lru_cache(maxsize=1024)
def _keys_of(queue: str) -> QueueKeys:
    return QueueKeys.made(queue)
