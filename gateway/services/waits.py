"""Waits for an event and cancel_on (docs/durable.md, "Waiting for an event"): the ``wait``
callback's path, and :class:`WaitResumer`, the :class:`~gateway.services.event_types.EventConsumer`
the events service hands every accepted event to.

No event is lost while a wait is being recorded: the two paths write before they read, in
opposite orders (Dekker's), and the one script that resumes (``lua/resume.lua``) lets only one
of them resume the task.

- The event's path writes the event (``jg:events:n:<name>``, the events service) BEFORE it
  reads ``jg:waits:<name>`` (:meth:`WaitResumer.consume`).
- The wait's path adds its queue to ``jg:waits:<name>`` and records the wait (``lua/wait.lua``)
  BEFORE it reads the events of that name accepted since the wait was recorded, less its
  lookback (:meth:`Waits.wait`'s post-check, through
  :class:`~gateway.services.event_types.RecentEvents`): the oldest that matches resumes it.

So an event written after the wait's read was made after the wait's writes, and its own read
finds the queue and the wait; an event written before it is in what the wait reads. Either
way one of the two sees the other. The rule for events accepted before the wait was recorded:
they do not resume it, unless the wait's ``lookback`` covers them (the resume script checks
``accepted_ms >= recorded_ms - lookback_ms`` whichever path calls it, so both paths apply the
same rule).

The queue is added to ``jg:waits:<name>`` before the wait script, not after it: a gateway that
dies between the two then leaves a member too many (harmless: it costs each event of that name
one HGET of that queue's shapes), never a wait no event can find. For the same reason members
are never removed: removing one safely would need the writers to add it again after their
script, and a writer that died there would lose its waits to every later event.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from gateway.core.matching import candidate_fields, canonical, index_field, matches, shape_of
from gateway.services.event_types import AcceptedEvent, RecentEvents, Touched
from gateway.store.clock import Clock
from gateway.store.records import seconds_to_ms
from gateway.store.tasks import CancelResult, Finish, Finished, TaskStore, Touch, Wait
from sdk.wire import AttemptOutcome, TaskState, WaitIn


def step_result(event: AcceptedEvent) -> str:
    """The JSON a wait's step records for ``event``: ``{id, name, data}``."""
    return json.dumps(
        {"id": event.id, "name": event.name, "data": event.data},
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
    )


@dataclass(frozen=True, slots=True)
class Waits:
    """The ``wait`` callback's path. ``recent``: the events read after a wait is recorded
    (the events service's store); without it there is no post-check, and an event accepted
    while the wait is being recorded may be missed (only tests and a gateway without the
    events service run so)."""

    tasks: TaskStore
    clock: Clock
    recent: RecentEvents | None = None

    async def wait(
        self, queue: str, task_id: str, token: str, body: WaitIn
    ) -> tuple[Finish, Finished, int]:
        """End the attempt as released with the task scheduled until the timeout and the
        wait recorded (fenced by ``token``); then the post-check. Returns the end, as asked
        and as the finish script read it (the caller checks its fence), and its time."""
        await self.tasks.mark_waits(queue, (body.event,))
        now = self.clock.now_ms()
        lookback = seconds_to_ms(body.lookback)
        wait = Wait(body.step, body.event, canonical(body.match), shape_of(body.match), lookback)
        finish = Finish(
            task_id, token, AttemptOutcome.RELEASED, delay_ms=max(1, seconds_to_ms(body.timeout))
        )
        done = await self.tasks.wait(queue, finish, wait, now)
        if done.state is TaskState.SCHEDULED and self.recent is not None:
            await self.post_check(queue, task_id, body, now, lookback)
        return finish, done, now

    async def post_check(
        self, queue: str, task_id: str, body: WaitIn, recorded_ms: int, lookback_ms: int = 0
    ) -> bool:
        """Resume task ``task_id`` with the oldest event named ``body.event`` matching its wait
        (:meth:`oldest_match`), if any; True when it did."""
        event = await self.oldest_match(body, recorded_ms, lookback_ms)
        if event is None:
            return False
        touched = await self.tasks.resume(
            queue,
            event.name,
            event.accepted_ms,
            step_result(event),
            [index_field(body.event, body.match)],
            self.clock.now_ms(),
            only=task_id,
        )
        return bool(touched)

    async def oldest_match(
        self, body: WaitIn, recorded_ms: int, lookback_ms: int
    ) -> AcceptedEvent | None:
        """The oldest event that matches the wait. Within the lookback, the first page of
        events from ``recorded_ms - lookback_ms`` is read (the lookback's limit:
        ``RECENT_LIMIT``, the 100 oldest of the name in its window); from ``recorded_ms`` on,
        every page, so no event accepted while the wait was recorded is missed however busy
        its name."""
        assert self.recent is not None
        if lookback_ms > 0:
            window = await self.recent.since(body.event, recorded_ms - lookback_ms)
            found = next((e for e in window if matches(body.match, e.data)), None)
            if found is not None:
                return found
        offset = 0
        while page := await self.recent.since(body.event, recorded_ms, offset):
            found = next((e for e in page if matches(body.match, e.data)), None)
            if found is not None:
                return found
            offset += len(page)
        return None


@dataclass(frozen=True, slots=True)
class WaitResumer:
    """The :class:`~gateway.services.event_types.EventConsumer` of waits and cancel_on: each
    queue in ``jg:waits:<name>`` with matches of a shape the event's data has gets one
    ``resume`` script call, which resumes every task waiting on it there; the tasks its
    cancel_on entries name are cancelled (at once when not running, by a cancel request when
    running). Idempotent: a wait resumed before has no wait left, and a task cancelled has no
    entries left (a running one asked again is asked again, and reported so)."""

    tasks: TaskStore
    clock: Clock

    async def consume(self, event: AcceptedEvent) -> list[Touched]:
        touched: list[Touched] = []
        for queue in await self.tasks.waiting_queues(event.name):
            shapes = await self.tasks.wait_shapes(queue, event.name)
            fields = candidate_fields(event.name, event.data, shapes)
            if not fields:
                continue
            now = self.clock.now_ms()
            result = step_result(event)
            for touch in await self.tasks.resume(
                queue, event.name, event.accepted_ms, result, fields, now
            ):
                done = await self._act(queue, touch, now)
                if done is not None:
                    touched.append(done)
        return touched

    async def _act(self, queue: str, touch: Touch, now: int) -> Touched | None:
        if touch.what == "resumed":
            return Touched(queue, touch.task_id, "resumed", touch.step)
        cancel = await self.tasks.cancel_task(queue, touch.task_id, now)
        if cancel.result is CancelResult.REQUESTED:
            return Touched(queue, touch.task_id, "cancel_requested", "cancel_on")
        if cancel.result is CancelResult.CANCELLED or cancel.state is TaskState.CANCELLED:
            return Touched(queue, touch.task_id, "cancelled", "cancel_on")
        return None
