"""Worker callbacks: heartbeat, checkpoint, step, logs, result, error, release, sleep, wait,
invoke, call.

A callback is authorised by its lease token alone, and every change is fenced by it inside one
script: a token that is not the task's current lease (the task was re-dispatched, or ended) gets
409 and changes nothing. That is what stops a zombie worker from overwriting a newer attempt.
The same scripts answer for a queue that is not registered (404) and a task that is not in the
queue named (404), so no combination of queue, task and token reaches a change.
"""

from __future__ import annotations

import json
import random

from gateway.core.backoff import retry_delay_ms
from gateway.core.errors import GatewayError, QueueNotFound, StaleLease, StepsTooLarge, TaskNotFound
from gateway.services.calls import Calls
from gateway.services.invokes import Invokes
from gateway.services.waits import Waits
from gateway.store.clock import Clock
from gateway.store.queues import QueueStore
from gateway.store.records import seconds_to_ms, to_datetime
from gateway.store.tasks import LOG_LINES_KEPT, Fence, Finish, Finished, TaskStore
from gateway.telemetry.metrics import Metrics
from sdk.wire import (
    MAX_STEPS_BYTES,
    AttemptOutcome,
    CallbackAck,
    CallIn,
    CheckpointIn,
    ErrorIn,
    HeartbeatIn,
    HeartbeatOut,
    InvokeIn,
    LogIn,
    ResultIn,
    SleepIn,
    StepIn,
    StepOut,
    TaskState,
    WaitIn,
)


def _check(fence: Fence, queue: str, task_id: str, state: TaskState | None = None) -> None:
    if fence is Fence.NOQUEUE:
        raise QueueNotFound(queue)
    if fence is Fence.NOTASK:
        raise TaskNotFound(task_id)
    if fence is not Fence.OK:
        now = f" (the task is {state.value})" if state else ""
        raise StaleLease(f"this lease is not the current one of task '{task_id}'{now}")


class CallbackService:
    def __init__(
        self,
        tasks: TaskStore,
        queues: QueueStore,
        clock: Clock,
        *,
        rng: random.Random | None = None,
        log_lines_kept: int = LOG_LINES_KEPT,
        metrics: Metrics | None = None,
        max_steps_bytes: int = MAX_STEPS_BYTES,
        waits: Waits | None = None,
        invokes: Invokes | None = None,
        calls: Calls | None = None,
    ) -> None:
        self._waits = waits or Waits(tasks, clock)
        self._invokes = invokes
        self._calls = calls
        self._max_steps_bytes = max_steps_bytes
        self._metrics = metrics or Metrics()
        self._log_lines_kept = log_lines_kept
        self._tasks = tasks
        self._queues = queues
        self._clock = clock
        self._rng = rng or random.Random()

    async def heartbeat(
        self, queue: str, task_id: str, token: str, body: HeartbeatIn
    ) -> HeartbeatOut:
        hb = await self._tasks.heartbeat(
            queue,
            task_id,
            token,
            self._clock.now_ms(),
            extend_ms=None if body.extend is None else seconds_to_ms(body.extend),
            progress=body.progress,
        )
        _check(hb.fence, queue, task_id, hb.state)
        return HeartbeatOut(
            cancel_requested=hb.cancel_requested, lease_expires_at=to_datetime(hb.expires_ms)
        )

    async def checkpoint(
        self, queue: str, task_id: str, token: str, body: CheckpointIn
    ) -> CallbackAck:
        hb = await self._tasks.heartbeat(
            queue,
            task_id,
            token,
            self._clock.now_ms(),
            checkpoint_json=json.dumps(body.state, separators=(",", ":"), allow_nan=False),
        )
        _check(hb.fence, queue, task_id, hb.state)
        return CallbackAck(state=TaskState.RUNNING)

    async def step(self, queue: str, task_id: str, token: str, body: StepIn) -> StepOut:
        """Record a durable step (fenced like a checkpoint); a name recorded before keeps its
        first result and the answer says so (``recorded`` false). A cancel request does not
        refuse it (the attempt runs until it ends); the answer says there is one."""
        done = await self._tasks.step(
            queue,
            task_id,
            token,
            self._clock.now_ms(),
            body.name,
            json.dumps(body.result, separators=(",", ":"), allow_nan=False),
            self._max_steps_bytes,
        )
        if done.size:
            raise StepsTooLarge(
                f"recording step '{body.name}' would make the steps of task '{task_id}' "
                f"{done.size} bytes; the limit per task is {self._max_steps_bytes} bytes "
                "(MAX_STEPS_BYTES): keep large results elsewhere and record a reference"
            )
        _check(done.fence, queue, task_id, done.state)
        return StepOut(
            recorded=done.recorded, attempt=done.attempt, cancel_requested=done.cancel_requested
        )

    async def logs(self, queue: str, task_id: str, token: str, body: LogIn) -> CallbackAck:
        now = self._clock.now_ms()
        lines = [
            line.model_copy(update={"at": line.at or to_datetime(now)}).model_dump_json(
                exclude_none=True
            )
            for line in body.lines
        ]
        fence = await self._tasks.append_log(
            queue, task_id, token, lines, keep=self._log_lines_kept
        )
        _check(fence, queue, task_id)
        return CallbackAck(state=TaskState.RUNNING)

    async def result(self, queue: str, task_id: str, token: str, body: ResultIn) -> CallbackAck:
        finish = Finish(
            task_id,
            token,
            AttemptOutcome.SUCCEEDED,
            text=json.dumps(body.result, separators=(",", ":"), allow_nan=False),
            warning=body.warning or "",
        )
        return await self._finish(queue, finish)

    async def error(self, queue: str, task_id: str, token: str, body: ErrorIn) -> CallbackAck:
        delay = 0
        if body.retryable:
            stored = await self._queues.get(queue)
            if stored is None:
                raise QueueNotFound(queue)
            record = await self._tasks.record(queue, task_id)
            if record is None:
                raise TaskNotFound(task_id)
            failures = int(record.get("att", 1))
            delay = retry_delay_ms(failures, stored.policy.backoff, self._rng, body.retry_delay)
        finish = Finish(
            task_id,
            token,
            AttemptOutcome.ERROR if body.retryable else AttemptOutcome.FAILED,
            text=body.error,
            traceback=body.traceback or "",
            delay_ms=delay,
            task_failure=True,  # the worker ran the task and reports its failure
        )
        return await self._finish(queue, finish)

    async def release(self, queue: str, task_id: str, token: str) -> CallbackAck:
        """The worker gives the task back (it is shutting down): queued again at once, the
        attempt not spent (after a cancel request it ends the task cancelled instead, its
        attempt ``cancelled``)."""
        return await self._finish(queue, Finish(task_id, token, AttemptOutcome.RELEASED))

    async def sleep(self, queue: str, task_id: str, token: str, body: SleepIn) -> CallbackAck:
        """A durable sleep: end the attempt as released (not spent) with the task scheduled
        for ``until``; its steps and checkpoint stay, and no worker holds it meanwhile. After a
        cancel request it ends the task cancelled instead, its attempt ``cancelled``."""
        delay = max(0, round(body.until.timestamp() * 1000) - self._clock.now_ms())
        return await self._finish(
            queue, Finish(task_id, token, AttemptOutcome.RELEASED, delay_ms=delay)
        )

    async def wait(self, queue: str, task_id: str, token: str, body: WaitIn) -> CallbackAck:
        """A wait for an event: end the attempt as released (not spent) with the task scheduled
        until the timeout and the wait recorded, then check the events accepted meanwhile
        (:class:`~gateway.services.waits.Waits`). After a cancel request it ends the task
        cancelled instead, as a sleep does."""
        finish, done, now_ms = await self._waits.wait(queue, task_id, token, body)
        self._metrics.finished(queue, (finish,), (done,), now_ms)
        _check(done.fence, queue, task_id, done.state)
        assert done.state is not None
        return CallbackAck(state=done.state)

    async def invoke(self, queue: str, task_id: str, token: str, body: InvokeIn) -> CallbackAck:
        """Invoke a child task: end the attempt as released (not spent) with the task
        scheduled until the timeout, its wait for the child recorded, and enqueue the child
        (:class:`~gateway.services.invokes.Invokes`). After a cancel request it ends the task
        cancelled instead, and no child is enqueued."""
        if self._invokes is None:
            raise GatewayError("this gateway was built without the task service invoke needs")
        return self._ended(queue, task_id, await self._invokes.invoke(queue, task_id, token, body))

    async def call(self, queue: str, task_id: str, token: str, body: CallIn) -> CallbackAck:
        """A durable HTTP call: end the attempt as released (not spent) with the task
        scheduled until the call's backstop and its wait recorded, and make the call
        (:class:`~gateway.services.calls.Calls`). After a cancel request it ends the task
        cancelled instead, and no call is made."""
        if self._calls is None:
            raise GatewayError("this gateway was built without the call runner calls need")
        return self._ended(queue, task_id, await self._calls.call(queue, task_id, token, body))

    def _ended(self, queue: str, task_id: str, ended: tuple[Finish, Finished, int]) -> CallbackAck:
        """The answer to a callback that ended the attempt with a wait (its end, as asked and
        as the script read it, and its time), counted in the metrics."""
        finish, done, now_ms = ended
        self._metrics.finished(queue, (finish,), (done,), now_ms)
        _check(done.fence, queue, task_id, done.state)
        assert done.state is not None
        return CallbackAck(state=done.state)

    async def _finish(self, queue: str, finish: Finish) -> CallbackAck:
        now_ms = self._clock.now_ms()
        done = await self._tasks.finish(queue, finish, now_ms)
        self._metrics.finished(queue, (finish,), (done,), now_ms)
        _check(done.fence, queue, finish.task_id, done.state)
        # No wake-up from here: when ready tasks wait for the room this end freed, the finish
        # script told every gateway's dispatcher over jg:wake, this one's included (its message
        # names no gateway); otherwise a claim now would find nothing to take.
        assert done.state is not None
        return CallbackAck(state=done.state)
