"""Ending attempts: results, errors, retries and cancels, each fenced by its lease."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from gateway.store import keys
from gateway.store.keys import QueueKeys
from gateway.store.notices import mark as mark_noticed
from gateway.store.tasks.base import StoreBase
from gateway.store.tasks.leases import Fence
from sdk.wire import AttemptOutcome, FailureKind, TaskState


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
    warning: str = ""  # succeeded, with this warning
    # An infrastructure failure's kind (the redrive policy filters on it); expired and stalled
    # attempts are 'timeout' whatever is given.
    failure: FailureKind | None = None
    # The worker said the task itself failed (a marked answer, an error callback): the attempt
    # counts as the endpoint's success, never against its circuit breaker.
    task_failure: bool = False


@dataclass(frozen=True, slots=True)
class Finished:
    """What the finish script did with one attempt's end. When the fence held (``OK``) it also
    says, for metrics, which task it was (``name``, ``version``), when the attempt started and
    the task was created, and how its endpoint's circuit changed (``'open'``, ``'closed'``)."""

    fence: Fence
    state: TaskState | None = None
    due_ms: int | None = None
    name: str = ""
    version: str = ""
    started_ms: int = 0
    created_ms: int = 0
    circuit: str = ""
    endpoint_id: str = ""


class CancelResult(StrEnum):
    CANCELLED = "CANCELLED"
    REQUESTED = "REQUESTED"
    FINISHED = "FINISHED"
    NOTASK = "NOTASK"
    NOQUEUE = "NOQUEUE"


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
        k.health,
        k.notify,
        k.key_counts,
    ]


def _finish_args(f: Finish) -> list[str | int]:
    return [
        f.task_id,
        f.token,
        f.outcome.value,
        "" if f.http_status is None else f.http_status,
        f.text,
        f.warning if f.outcome is AttemptOutcome.SUCCEEDED else f.traceback,
        f.delay_ms,
        "" if f.failure is None else f.failure.value,
        "1" if f.task_failure else "",
    ]


def _finished(reply: list[Any]) -> Finished:
    fence = Fence(reply[0])
    if fence is Fence.OK:
        return Finished(
            fence,
            TaskState(reply[1]),
            int(reply[2]) if reply[2] else None,
            name=reply[3],
            version=reply[4],
            started_ms=int(reply[5]),
            created_ms=int(reply[6]),
            circuit=reply[7],
            endpoint_id=reply[8],
        )
    if fence is Fence.STALE:
        return Finished(fence, TaskState(reply[1]))
    return Finished(fence)


class Finishing(StoreBase):
    """Ends attempts and cancels tasks."""

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
        args: list[str | int] = [now_ms, keys.DONE_CHANNEL_PREFIX, queue, keys.WAKE_CHANNEL]
        for f in finishes:
            args += _finish_args(f)
        replies = await self._scripts.call("finish", _finish_keys(QueueKeys.of(queue)), args)
        if len(replies) > len(finishes):  # a completion callback notice was recorded
            replies.pop()
            await mark_noticed(self._redis, queue, now_ms)
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
                k.notify,
                k.key_counts,
            ],
            [task_id, now_ms, keys.DONE_CHANNEL_PREFIX, queue, keys.WAKE_CHANNEL],
        )
        result = CancelResult(reply[0])
        if result is CancelResult.CANCELLED and len(reply) > 1:  # a notice was recorded
            await mark_noticed(self._redis, queue, now_ms)
        return result
