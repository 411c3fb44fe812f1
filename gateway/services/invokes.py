"""Invoking a child task (docs/durable.md, "Invoking a task"): the ``invoke`` callback's path,
and the enqueue of children the recoverer finds in an outbox.

The order that loses nothing:

1. One script on the parent's queue (``lua/invoke.lua``) ends the attempt as released (no
   attempt spent), leaves the parent scheduled until the timeout with its wait for the child
   (``wt``), and puts the child's enqueue in the queue's outbox.
2. The child is enqueued, with its parent link (``par``: queue, id, step), by this gateway at
   once, and by the recoverer of any gateway when it delivers the outbox. The child's id is
   derived from the parent's id and the step (:func:`child_id`), so the second enqueue finds
   the first's task (``TaskExists``) and does nothing.
3. The child's final state (finish, cancel, a dependency failing it) appends its end to the
   child queue's outbox in the same script (``record_child_end``), which the recoverer hands
   to the parent's queue (:mod:`gateway.store.child_ends`): the parent is resumed, its step
   recorded with the child's end, only while it still waits for that child, so once.

A child the gateway refuses for good (its queue does not exist, its payload is refused: a 4xx)
resumes its parent at once with the step's result ``{"state": "refused", "id", "error"}``.

A parent cancelled while it waits for its child cancels the child (Temporal's default parent
close policy): the parent's cancel script puts ``{"cc": child, "cq": its queue, "p": parent}``
in the parent queue's outbox, and the recoverer of any gateway cancels the child in its queue
(:meth:`Invokes.cancel_children`; a child that ended, or went, is left as it is).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gateway.core.errors import GatewayError, TaskExists
from gateway.core.ids import derived_id, ulid_ms
from gateway.services.tasks import TaskService
from gateway.store.child_ends import step_result
from gateway.store.clock import Clock
from gateway.store.records import seconds_to_ms
from gateway.store.tasks import ChildWait, Finish, Finished, TaskStore
from sdk.wire import AttemptOutcome, InvokeIn, TaskCreate, TaskState

log = logging.getLogger(__name__)


def child_id(parent_id: str, step: str) -> str:
    """The id of the child task ``parent_id`` invokes in ``step``: a ULID whose time is the
    parent's (when its id is a ULID) and whose random bits are the first 80 of
    sha256("invoke" + "\\n" + parent id + "\\n" + step)."""
    return derived_id(ulid_ms(parent_id), "invoke", parent_id, step)


def timed_out(child: str, timeout: float) -> str:
    """The step's result when the timeout comes before the child's end."""
    error = f"the child did not end within {timeout:g}s"
    return step_result("timed_out", child, None, error)


@dataclass(frozen=True, slots=True)
class Invokes:
    """The ``invoke`` callback's path, and the recoverer's enqueue of children and cancel of
    the children of cancelled parents (:meth:`deliver`, the :attr:`DependencyStore.on_invoke`
    hook)."""

    tasks: TaskStore
    task_service: TaskService
    clock: Clock

    async def invoke(
        self, queue: str, task_id: str, token: str, body: InvokeIn
    ) -> tuple[Finish, Finished, int]:
        """End the attempt as released with the task scheduled until the timeout and its wait
        for the child recorded, the child's enqueue in the outbox (fenced by ``token``); then
        enqueue the child. Returns the end, as asked and as the script read it (the caller
        checks its fence), and its time."""
        child_queue = body.queue or queue
        child = child_id(task_id, body.step)
        spec = TaskCreate(
            id=child,
            name=body.name,
            payload=body.payload,
            priority=body.priority,
            max_attempts=body.max_attempts,
        )
        entry = {
            "inv": child_queue,
            "pq": queue,
            "p": task_id,
            "s": body.step,
            "task": spec.model_dump(mode="json", exclude_none=True),
        }
        wait = ChildWait(
            body.step,
            child_queue,
            child,
            timed_out(child, body.timeout),
            json.dumps(entry, separators=(",", ":"), ensure_ascii=False),
        )
        finish = Finish(
            task_id, token, AttemptOutcome.RELEASED, delay_ms=max(1, seconds_to_ms(body.timeout))
        )
        now = self.clock.now_ms()
        done = await self.tasks.invoke(queue, finish, wait, now)
        if done.state is TaskState.SCHEDULED:
            await self.enqueue_children([entry])
        return finish, done, now

    async def deliver(self, entries: Sequence[dict[str, Any]]) -> None:
        """Act on outbox entries: enqueue the children ``inv`` entries name, then cancel those
        ``cc`` entries name."""
        await self.enqueue_children([e for e in entries if "inv" in e])
        await self.cancel_children([e for e in entries if "cc" in e])

    async def cancel_children(self, entries: Sequence[dict[str, Any]]) -> None:
        """Cancel each child a cancelled parent waited for: at once when it is not running, by
        a cancel request when it is. A child that ended, or is gone, is left as it is (so a
        repeat is a no-op); Redis unreachable raises, and the outbox keeps the entry."""
        for entry in entries:
            child, queue = str(entry["cc"]), str(entry["cq"])
            done = await self.tasks.cancel_task(queue, child, self.clock.now_ms())
            log.info("task %s cancelled: its child %s: %s", entry["p"], child, done.result.value)

    async def enqueue_children(self, entries: Sequence[dict[str, Any]]) -> None:
        """Enqueue each child an outbox entry names (a no-op for one that exists). A child
        refused for good resumes its parent with ``refused``; anything else (Redis
        unreachable) raises, and the outbox keeps the entry for the next delivery."""
        for entry in entries:
            spec = TaskCreate.model_validate(entry["task"])
            parent = (str(entry["pq"]), str(entry["p"]), str(entry["s"]))
            try:
                await self.task_service.enqueue(
                    str(entry["inv"]), [spec], batch=False, parent=parent
                )
            except TaskExists:
                pass  # made by an earlier try: the same child
            except GatewayError as e:
                if e.status >= 500:
                    raise
                assert spec.id is not None
                reason = f"the child was not enqueued: {e.detail or e}"
                log.warning("invoke of %s by task %s: %s", spec.id, parent[1], reason)
                result = step_result("refused", spec.id, None, reason)
                await self.tasks.resume_child(
                    parent[0], parent[1], spec.id, result, self.clock.now_ms()
                )
