"""A durable HTTP call (docs/durable.md, "A durable HTTP call"): the ``call`` callback's path.

The order that loses nothing:

1. One script on the task's queue (``lua/call.lua``) ends the attempt as released (no attempt
   spent), leaves the task scheduled until the call's backstop with its wait for the call
   (``wt``), and records the call with a lease in the queue's ``calls``.
2. This gateway makes the call at once (:class:`~gateway.dispatch.calls.CallRunner`); when it
   has no room the call is recorded with its lease already out, and when it stops mid-call the
   lease runs out: then the recoverer of any gateway with room makes it (again: at-least-once;
   the ``Idempotency-Key`` is the task id and the step).
3. The answer resumes the task (``lua/resume_call.lua``) only while it still waits for that
   call, so once; at the backstop, promote.lua records the ``timed_out`` result instead.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from gateway.dispatch.calls import LEASE_GRACE_MS, CallRunner, backstop_seconds
from gateway.store.clock import Clock
from gateway.store.records import seconds_to_ms
from gateway.store.tasks import CallWait, ClaimedCall, Fence, Finish, Finished, TaskStore
from sdk.wire import AttemptOutcome, CallIn, TaskState


def timed_out(backstop: float) -> str:
    """The step's result when the backstop comes before any answer was recorded."""
    error = f"no answer was recorded within {backstop:g}s"
    return json.dumps({"error": error, "kind": "timed_out"}, separators=(",", ":"))


@dataclass(frozen=True, slots=True)
class Calls:
    """The ``call`` callback's path."""

    tasks: TaskStore
    runner: CallRunner
    clock: Clock

    async def call(
        self, queue: str, task_id: str, token: str, body: CallIn
    ) -> tuple[Finish, Finished, int]:
        """End the attempt as released with the task scheduled until the backstop, its wait
        for the call and the call's lease recorded (fenced by ``token``); then make the call.
        Returns the end, as asked and as the script read it (the caller checks its fence),
        and its time."""
        backstop = backstop_seconds(body.timeout)
        request = body.model_dump_json(exclude_none=True)
        now = self.clock.now_ms()
        timeout_ms = seconds_to_ms(body.timeout)
        room = self.runner.has_room  # else leased to no one: a recoverer with room takes it
        lease_until = now + timeout_ms + LEASE_GRACE_MS if room else now
        wait = CallWait(body.step, request, lease_until, timed_out(backstop), timeout_ms)
        finish = Finish(
            task_id, token, AttemptOutcome.RELEASED, delay_ms=max(1, seconds_to_ms(backstop))
        )
        done = await self.tasks.call(queue, finish, wait, now)
        if room and done.fence is Fence.OK and done.state is TaskState.SCHEDULED:
            self.runner.start(ClaimedCall(queue, task_id, body.step, request, lease_until))
        return finish, done, now
