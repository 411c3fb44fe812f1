"""The tasks running on one worker: admit the tasks of a push, run them, report each one.

A single push and a batch push go through the same :meth:`Runner.run`, as a list of
:class:`~sdk.pushes.Delivery` (one task, its lease token and its callback URL) — a single push
is simply a list of one. For each task, in order:

- no free slot (``max_concurrency`` tasks run already, inline or in the background, counting
  those just admitted from this push) or the worker is shutting down: 503 with Retry-After
  (``busy_retry_after``), see :func:`~sdk.outcomes.busy`;
- no task function has its name: 404;
- its payload is not ``{"args": [...], "kwargs": {...}}`` fitting the function: 422;
- else its :class:`~sdk.attempt.Attempt` starts at once (``async def`` on the event loop, plain
  functions in the thread pool), so all tasks of a batch run concurrently.

Then the runner waits up to ``inline_window`` — one window for the whole push, not one per task
— for the started attempts (an attempt of a task declared ``inline=False`` is not waited for).
Those that ended are answered with their :class:`~sdk.outcomes.Verdict`; the others with
:data:`~sdk.outcomes.ACCEPTED` (202) and handed to :meth:`~sdk.attempt.Attempt.supervise`, which
keeps their lease alive and sends their verdict to their own callback URL, fenced by their own
lease. If the push goes away while it waits, every attempt of it reports by callback.

:meth:`Runner.shutdown` (the worker's lifespan end: where an ASGI app hears of SIGTERM) refuses
new tasks, then follows the ``shutdown`` policy for the tasks still running, inline or not:

- ``finish``: wait up to ``shutdown_timeout`` for them to end, then treat the rest as ``requeue``;
- ``requeue``: stop them and give them back to the queue at once, no attempt spent (the
  ``release`` callback; an inline one is answered 503 with Retry-After: 0);
- ``fail``: stop them and fail them, not retried (error "worker shut down"; inline: 422).

A pull worker (:mod:`sdk.pull`) hands its leased tasks to :meth:`Runner.run_detached` instead:
no answer waits for them, so every attempt reports by callback, and a task refused (no such
task: 404, a payload that does not fit: 422) is reported by the error callback, not retried,
as the gateway records a push answered so.

Stopping cancels an ``async def``, which gets :data:`UNWIND_TIMEOUT` seconds to run its
``finally`` blocks; a plain function cannot be interrupted: its context is flagged (its next
heartbeat raises :class:`~sdk.errors.Cancelled`) and it is abandoned at once (the process exits
when it returns). Either way, the shutdown ends once every stopped task has been reported.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal, TypedDict, get_args

from pydantic import ValidationError

from sdk.arguments import plain_call
from sdk.attempt import Attempt
from sdk.callback_client import SESSIONS, FirstUse, preload
from sdk.callbacks import FINAL_RETRY_DELAYS, CallbackChannel
from sdk.chains import passed_argument
from sdk.context import TimeBudget
from sdk.outcomes import ACCEPTED, LEASE_LOST, Outcome, Refusal, Stop, busy, field_errors
from sdk.pushes import Delivery
from sdk.tasks import TaskFunction
from sdk.telemetry.recorder import NoMetrics, worker_metrics
from sdk.wire import PushBody, TaskArgs

if TYPE_CHECKING:
    import httpx
    from opentelemetry.metrics import MeterProvider

    from sdk.sessions import Session

__all__ = ["Runner", "RunnerOptions", "ShutdownPolicy"]

log = logging.getLogger(__name__)

ShutdownPolicy = Literal["finish", "requeue", "fail"]
"""What the worker does at shutdown with the tasks still running (see the module docstring)."""

UNWIND_TIMEOUT = 5.0
"""Seconds a task function cancelled at shutdown gets to end before it is abandoned."""


class RunnerOptions(TypedDict, total=False):
    """The options of :class:`~sdk.worker.Worker` (defaults: :class:`Runner`'s signature)."""

    inline_window: float
    heartbeat_interval: float | None
    max_concurrency: int | None
    busy_retry_after: float
    shutdown: ShutdownPolicy
    shutdown_timeout: float
    time_limit: float | None
    time_limit_margin: float
    callback_timeout: float
    final_retry_delays: Sequence[float]
    transport: httpx.AsyncBaseTransport | None
    meter_provider: MeterProvider | None


class Runner:
    """The attempts running on one worker, and the callback client they share.

    The options are :class:`~sdk.worker.Worker`'s; ``open`` and ``close`` bracket its lifespan.
    """

    def __init__(
        self,
        tasks: Iterable[TaskFunction[Any, Any]],
        *,
        inline_window: float = 5.0,
        heartbeat_interval: float | None = None,
        max_concurrency: int | None = None,
        busy_retry_after: float = 1.0,
        shutdown: ShutdownPolicy = "finish",
        shutdown_timeout: float = 20.0,
        time_limit: float | None = None,
        time_limit_margin: float = 1.0,
        callback_timeout: float = 10.0,
        final_retry_delays: Sequence[float] = FINAL_RETRY_DELAYS,
        transport: httpx.AsyncBaseTransport | None = None,
        meter_provider: MeterProvider | None = None,
    ) -> None:
        self.tasks: dict[str, TaskFunction[Any, Any]] = {}
        for fn in tasks:
            if fn.name in self.tasks:
                raise ValueError(f"two task functions are named {fn.name!r}")
            self.tasks[fn.name] = fn
        if shutdown not in get_args(ShutdownPolicy):
            raise ValueError(f"shutdown must be 'finish', 'requeue' or 'fail', not {shutdown!r}")
        if max_concurrency is not None and max_concurrency < 1:
            raise ValueError("max_concurrency must be at least 1")
        if time_limit is not None and time_limit <= 0:
            raise ValueError("time_limit must be positive")
        if time_limit_margin < 0:
            raise ValueError("time_limit_margin must not be negative")
        self.inline_window = inline_window
        self.heartbeat_interval = heartbeat_interval
        self.max_concurrency = max_concurrency
        self.busy_retry_after = busy_retry_after
        self.shutdown_policy = shutdown
        self.shutdown_timeout = shutdown_timeout
        self.time_limit = time_limit
        self.time_limit_margin = time_limit_margin
        self.invocation_ends: float | None = None
        """When the current invocation is cut (a :func:`time.monotonic` instant), for a worker
        run as a function with a time limit: :mod:`sdk.lambda_handler` sets it per invocation."""
        self._closing = False
        self._callback_timeout = callback_timeout
        self._final_retry_delays = tuple(final_retry_delays)
        self._transport = transport
        self._http: Session | None = None
        self._callbacks = FirstUse(self._client)
        self._attempts: set[Attempt] = set()
        self._idle = asyncio.Event()  # set while no attempt runs or awaits its report
        self._idle.set()
        self._supervisors: set[asyncio.Task[None]] = set()
        self._meter_provider = meter_provider
        self.metrics = worker_metrics(self.tasks, meter_provider)
        self._refusals: set[asyncio.Task[bool]] = set()
        self.slot_freed = asyncio.Event()  # set whenever an attempt ends here

    @property
    def running(self) -> int:
        """Tasks running here now."""
        return len(self._attempts)

    @property
    def closing(self) -> bool:
        """True once shutdown has begun: new tasks are refused."""
        return self._closing

    def open(self) -> None:
        """Accept tasks, and load the callback client's modules in the background."""
        self._closing = False
        if isinstance(self.metrics, NoMetrics):  # OpenTelemetry set up since the worker was built
            self.metrics = worker_metrics(self.tasks, self._meter_provider)
        preload(SESSIONS)

    async def close(self) -> None:
        """End the running tasks (:meth:`shutdown`), then close the callback client."""
        await self.shutdown()
        await asyncio.gather(*self._refusals, return_exceptions=True)
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    async def shutdown(self) -> None:
        """Refuse new tasks (503), then follow the shutdown policy for those still running
        (module docstring); returns once each of them has been answered or reported."""
        self._closing = True
        if self.shutdown_policy == "finish":
            await self._settle(self.shutdown_timeout)
        stop = Stop.FAIL if self.shutdown_policy == "fail" else Stop.REQUEUE
        stopped = [attempt for attempt in self._attempts if not attempt.ended()]
        for attempt in stopped:
            log.warning("task %s (%s) stopped by shutdown: %s", *_named(attempt), stop.value)
            attempt.stop(stop)
        await self._settle(UNWIND_TIMEOUT)
        for attempt in stopped:
            if not attempt.ended():
                log.warning("task %s (%s) did not stop: abandoned", *_named(attempt))
                attempt.abandon()
        await self._idle.wait()

    async def _settle(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for every running attempt to settle."""
        pending = [attempt.settled for attempt in self._attempts if not attempt.ended()]
        if pending and timeout > 0:
            await asyncio.wait(pending, timeout=timeout)

    async def run(self, deliveries: Sequence[Delivery]) -> list[Outcome]:
        """Admit and start the tasks of one push, wait the inline window: one outcome each."""
        free = self._free_slots()
        admitted: list[Attempt | Refusal] = []
        for delivery in deliveries:
            self.metrics.delivered(delivery.push)
            started: Attempt | Refusal
            if free > 0:
                started = self._start(delivery)
            else:
                started = busy(self.busy_retry_after, closing=self._closing)
            if isinstance(started, Attempt):
                free -= 1
            else:
                self.metrics.refused(delivery.push, started)
            admitted.append(started)
        await self._wait_inline([a for a in admitted if isinstance(a, Attempt)])
        return [a if isinstance(a, Refusal) else self._outcome(a) for a in admitted]

    async def run_detached(self, deliveries: Sequence[Delivery]) -> None:
        """Start the tasks of a pull lease; each reports by callback alone (nothing waits for
        an answer). No slot check: the pull loop leases no more tasks than it has free slots."""
        for delivery in deliveries:
            started = self._start(delivery)
            if isinstance(started, Attempt):
                self._supervise(started)
                continue
            log.warning(
                "task %s (%s) refused: %s", delivery.push.id, delivery.push.name, started.title
            )
            report = asyncio.create_task(self._channel(delivery).finish(started.error))
            self._refusals.add(report)
            report.add_done_callback(self._refusals.discard)

    def free_slots(self) -> float:
        """Tasks this worker may still start now (``math.inf`` without ``max_concurrency``)."""
        return self._free_slots()

    def _free_slots(self) -> float:
        if self._closing:
            return 0
        if self.max_concurrency is None:
            return math.inf
        return self.max_concurrency - self.running

    def _start(self, delivery: Delivery) -> Attempt | Refusal:
        push = delivery.push
        fn = self.tasks.get(push.name)
        if fn is None:
            return Refusal(404, "Unknown task", f"this worker has no task named {push.name!r}")
        plain = plain_call(push.payload)
        if plain is not None:
            given, named, results_as = *plain, None
        else:
            try:
                call = TaskArgs.model_validate(push.payload)
            except ValidationError as e:
                detail = 'the payload must be {"args": [...], "kwargs": {...}}'
                return Refusal(422, "Invalid payload", detail, field_errors(e, "payload"))
            given, named, results_as = call.args, call.kwargs, call.results_as
        attempt = Attempt(
            fn,
            push,
            self._channel(delivery),
            self.heartbeat_interval,
            trace=delivery.trace,
            budget=self._budget(push) if fn.signature.takes_context else None,
        )
        try:
            ctx = attempt.context() if fn.signature.takes_context else None
            if results_as is not None:  # a chain's link or a chord's callback
                passed = passed_argument(push, results_as)
                if isinstance(passed, Refusal):
                    return passed
                given = [passed, *given]
            args, kwargs = fn.signature.layout(given, named, ctx)
        except TypeError as e:
            return Refusal(422, "Arguments do not fit the task", str(e))
        attempt.start(args, kwargs)
        if not isinstance(self.metrics, NoMetrics):  # recording nothing, it needs no callback
            began = time.perf_counter()
            attempt.settled.add_done_callback(
                lambda _: self.metrics.ended(
                    push, attempt.verdict(), attempt.stopped, (time.perf_counter() - began) * 1000
                )
            )
        self._attempts.add(attempt)
        self._idle.clear()
        return attempt

    def _budget(self, push: PushBody) -> TimeBudget | None:
        """The time limit of an attempt starting now, when this worker knows one: its
        ``time_limit`` from now, the invocation's end, and then the push's deadline too."""
        ends = self.invocation_ends
        now = time.monotonic()
        if self.time_limit is not None:
            ends = now + self.time_limit if ends is None else min(ends, now + self.time_limit)
        if ends is None:
            return None
        if push.deadline is not None:
            ends = min(ends, now + (push.deadline - datetime.now(UTC)).total_seconds())
        return TimeBudget(ends, self.time_limit_margin)

    def _channel(self, delivery: Delivery) -> CallbackChannel:
        return CallbackChannel(
            self._callbacks,
            delivery.callback,
            delivery.lease,
            delivery.push.lease_expires_at,
            self._final_retry_delays,
            self._callback_timeout,
        )

    async def _wait_inline(self, attempts: list[Attempt]) -> None:
        """Wait up to the inline window for all ``attempts`` at once (not for those of tasks
        declared ``inline=False``, which always answer 202 and call back)."""
        waited = [attempt.settled for attempt in attempts if attempt.fn.inline]
        if not waited or self.inline_window <= 0:
            return
        try:
            # Two turns of the loop first: the functions start in the first, ahead of the
            # wait's set-up, and one that ended there (nothing awaited) is settled by the
            # second (its done callbacks), so nothing is left to wait for but a third turn,
            # for the settled futures' own callbacks (the task's metrics), which run before
            # its answer as they do after a wait.
            await asyncio.sleep(0)
            await asyncio.sleep(0)
            if all(settled.done() for settled in waited):
                await asyncio.sleep(0)
            else:
                await asyncio.wait(waited, timeout=self.inline_window)
        except asyncio.CancelledError:  # the push went away: carry on, report by callback
            for attempt in attempts:
                self._supervise(attempt)
            raise

    def _outcome(self, attempt: Attempt) -> Outcome:
        if attempt.fn.inline and attempt.ended():
            verdict = attempt.verdict()
            if verdict is None:
                self._discard(attempt)
                return LEASE_LOST
            if verdict.sleep_until is None and verdict.wait is None:  # (by their callbacks)
                self._discard(attempt)
                return verdict
        self._supervise(attempt)
        return ACCEPTED

    def _discard(self, attempt: Attempt) -> None:
        if attempt in self._attempts:
            self.slot_freed.set()
        self._attempts.discard(attempt)
        if not self._attempts:
            self._idle.set()

    def _supervise(self, attempt: Attempt) -> None:
        supervisor = asyncio.create_task(attempt.supervise())
        self._supervisors.add(supervisor)

        def done(task: asyncio.Task[None]) -> None:
            self._supervisors.discard(task)
            self._discard(attempt)
            if not task.cancelled() and task.exception() is not None:
                log.error("task %s: supervision failed", attempt.push.id, exc_info=task.exception())

        supervisor.add_done_callback(done)

    def _client(self) -> Session:
        if self._http is None:
            from sdk.sessions import open_session  # preloaded since open() (preload)

            self._http = open_session(self._transport)
        return self._http


def _named(attempt: Attempt) -> tuple[str, str]:
    return attempt.push.id, attempt.push.name
