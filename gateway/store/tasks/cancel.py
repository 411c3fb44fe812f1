"""Cancelling a task: one ``cancel`` script call (``lua/cancel.lua``)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from gateway.store import keys
from gateway.store.keys import QueueKeys
from gateway.store.notices import mark as mark_noticed
from gateway.store.tasks.base import StoreBase
from sdk.wire import TaskState


class CancelResult(StrEnum):
    CANCELLED = "CANCELLED"  # it was queued, scheduled or waiting: it ended cancelled now
    REQUESTED = "REQUESTED"  # it is running: asked to stop (the end of its attempt decides)
    FINISHED = "FINISHED"  # it had ended (its state says how)
    NOTASK = "NOTASK"
    NOQUEUE = "NOQUEUE"


@dataclass(frozen=True, slots=True)
class Cancel:
    """What the cancel script did with one task: its result and, when the task had ended
    (``FINISHED``), the state it ended in."""

    result: CancelResult
    state: TaskState | None = None


class Cancelling(StoreBase):
    """Cancels tasks."""

    async def cancel(self, queue: str, task_id: str, now_ms: int) -> CancelResult:
        return (await self.cancel_task(queue, task_id, now_ms)).result

    async def cancel_task(self, queue: str, task_id: str, now_ms: int) -> Cancel:
        """Cancel one task (cancel.lua): what the script did, read from its reply alone."""
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
                k.notify,
                k.key_counts,
                k.waits,
                k.wait_shapes,
                k.calls,
            ],
            [task_id, now_ms, keys.DONE_CHANNEL_PREFIX, queue, keys.WAKE_CHANNEL],
        )
        result = CancelResult(reply[0])
        if result is CancelResult.CANCELLED and len(reply) > 1:  # a notice was recorded
            await mark_noticed(self._redis, queue, now_ms)
        if result is CancelResult.FINISHED:
            return Cancel(result, TaskState(reply[1]))
        return Cancel(result)
