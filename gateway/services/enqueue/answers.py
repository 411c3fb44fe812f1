"""The last stage of an enqueue: each task's answer, from what the store holds after the script.

A task stored as sent answers with what was sent and the state the script stored it in
(:class:`~gateway.services.enqueue.created.Created` builds it only when asked). Every other outcome
answers with what the script stored, never with the request:

- a debounce that replaced a pending task's payload: that task's record as the script saved it
  (the script returns it; only the payload and run_at are this enqueue's), with this payload;
- a task stored with dependencies: its record as the script left it (it decided the state, the
  wait list and depends_on, and may have ended it); one with a dependency in another queue is
  read back once its link is made, as linking may release or fail it;
- a throttle that delayed the task: the run_at the script stored, and ``flow.throttled:
  delayed``, which the record keeps (``thd``) so a read shows it too;
- a dedup or singleton key that matched, or a throttle that dropped the enqueue: the earlier
  task, read from the store (with its result and attempts, as a GET shows it).
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Collection, Sequence

from gateway.core.errors import TaskNotFound, Throttled
from gateway.services.enqueue.created import Created, created_view
from gateway.store.records import NewTask, task_from_record, to_datetime
from gateway.store.tasks import Stored
from sdk.wire import QueuePolicy, Task, TaskCreate, TaskFlow

Read = Callable[[str, str], Awaitable[Task]]
"""Reads a task of a queue as GET shows it: :meth:`gateway.services.task_reads.TaskReader.read`."""


async def answers(
    queue: str,
    specs: Sequence[TaskCreate],
    new: Sequence[NewTask],
    stored: Sequence[Stored],
    policy: QueuePolicy,
    read: Read,
    linked: Collection[str] = (),
) -> list[Created]:
    """Each task's answer; ``linked``: the ids of tasks whose dependencies in other queues
    were linked after the script (they are read back)."""
    created = []
    for spec, n, s in zip(specs, new, stored, strict=True):
        if s.duplicate_of is not None:
            first = await read(queue, s.duplicate_of)
            earlier = first.model_copy(update={"deduplicated": True})
            created.append(Created(queue, spec, n, first.state, policy, earlier))
        elif s.state is None:
            shown = await _flow_view(queue, n, s, policy, read)
            created.append(Created(queue, spec, n, shown.state, policy, flowed=shown))
        elif n.id in linked:
            shown = await read(queue, n.id)
            created.append(Created(queue, spec, n, shown.state, policy, flowed=shown))
        elif s.record is not None:
            shown = task_from_record(queue, n.id, s.record, policy, payload=n.payload_json)
            created.append(Created(queue, spec, n, shown.state, policy, flowed=shown))
        elif s.delayed_to is not None:
            task = created_view(queue, spec, n, s.state, policy)
            update = {"flow": TaskFlow(throttled="delayed"), "run_at": to_datetime(s.delayed_to)}
            shown = task.model_copy(update=update)
            created.append(Created(queue, spec, n, s.state, policy, flowed=shown))
        else:
            created.append(Created(queue, spec, n, s.state, policy))
    return created


async def _flow_view(queue: str, new: NewTask, s: Stored, policy: QueuePolicy, read: Read) -> Task:
    """The answer for an enqueue its debounce merged into a pending task (that task as this
    enqueue left it: the record the script saved, with this enqueue's payload, whatever later
    enqueues did since), or its throttle dropped (the last task its window let through)."""
    if s.replaced is not None:
        r = s.replaced
        merged = task_from_record(queue, r.id, r.record, policy, payload=new.payload_json)
        flow = (merged.flow or TaskFlow()).model_copy(update={"replaced": True})
        return merged.model_copy(update={"flow": flow})
    if s.dropped_for:
        with contextlib.suppress(TaskNotFound):
            kept = await read(queue, s.dropped_for)
            flow = (kept.flow or TaskFlow()).model_copy(update={"throttled": "dropped"})
            return kept.model_copy(update={"flow": flow})
    raise Throttled(
        f"throttled: task '{new.name}' with throttle key '{new.throttle and new.throttle[0]}' "
        "reached its limit for the current window, and the task it let through last no "
        "longer exists"
    )
