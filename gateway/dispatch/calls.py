"""The gateway's durable HTTP calls in flight (docs/durable.md, "A durable HTTP call").

A call is recorded with a lease (``lua/call.lua``): the gateway that took the ``call``
callback starts it here at once, each in its own asyncio task, at most ``max_in_flight`` at a
time per gateway. One that finds no room is not queued in the process: it is recorded with its
lease already out, so the recoverer of a gateway with room claims it at its next step
(``lua/claim_calls.lua``, :meth:`CallRunner.reclaim`), as it claims the calls of a gateway that
stopped once their lease runs out: at-least-once,
which the ``Idempotency-Key`` lets the callee dedupe. The lease is one try's timeout plus
:data:`LEASE_GRACE_MS`, renewed before each retry; the answer (or the failure) resumes the task
through ``lua/resume_call.lua``, once, however many times the call was made.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import aiohttp

from gateway.dispatch.http_call import idempotency_key, make_call
from gateway.settings import Settings
from gateway.store.clock import Clock
from gateway.store.tasks import ClaimedCall, TaskStore
from sdk.wire import CallIn

log = logging.getLogger(__name__)

LEASE_GRACE_MS = 15_000
"""How long past one try's timeout a call's lease lasts: time for its answer to be recorded."""


def backstop_seconds(timeout: float) -> float:
    """When a call's wait ends though nothing was recorded (every gateway that made it
    stopped, again and again): four tries' timeouts and a minute after it was recorded."""
    return 4 * timeout + 60


class CallRunner:
    """The calls this gateway makes, bounded by ``max_in_flight``; owned by the app's
    lifespan (:meth:`close`)."""

    def __init__(
        self,
        tasks: TaskStore,
        session: aiohttp.ClientSession,
        clock: Clock,
        *,
        max_in_flight: int,
        max_body: int,
        allow_private: bool,
        on_ready: Callable[[str], None] = lambda queue: None,
    ) -> None:
        self._tasks = tasks
        self._session = session
        self._clock = clock
        self._max_in_flight = max_in_flight
        self._max_body = max_body
        self._allow_private = allow_private
        self._on_ready = on_ready
        self._running: set[asyncio.Task[None]] = set()

    @classmethod
    def of(
        cls,
        settings: Settings,
        tasks: TaskStore,
        session: aiohttp.ClientSession,
        clock: Clock,
        on_ready: Callable[[str], None],
    ) -> CallRunner:
        """The runner the settings describe (``max_calls_in_flight``, ``call_max_body_bytes``,
        and the endpoints' ``allow_private_endpoints``)."""
        return cls(
            tasks,
            session,
            clock,
            max_in_flight=settings.max_calls_in_flight,
            max_body=settings.call_max_body_bytes,
            allow_private=settings.allow_private_endpoints,
            on_ready=on_ready,
        )

    @property
    def in_flight(self) -> int:
        return len(self._running)

    @property
    def has_room(self) -> bool:
        """True while :meth:`start` would make a call."""
        return len(self._running) < self._max_in_flight

    def start(self, call: ClaimedCall) -> bool:
        """Make ``call`` in the background; False when there is no room (its lease will run
        out and a recoverer with room will claim it)."""
        if not self.has_room:
            log.warning("no room for the call of task %s: left to its lease", call.task_id)
            return False
        task = asyncio.create_task(self._run(call), name=f"call {call.task_id}")
        self._running.add(task)
        task.add_done_callback(self._running.discard)
        return True

    async def reclaim(self, queue: str, now_ms: int) -> int:
        """Claim the calls of ``queue`` whose lease ran out, as many as there is room for, and
        make them; returns how many."""
        room = self._max_in_flight - len(self._running)
        if room <= 0:
            return 0
        claimed = await self._tasks.claim_calls(queue, now_ms, room, LEASE_GRACE_MS)
        for call in claimed:
            self.start(call)
        return len(claimed)

    async def _run(self, call: ClaimedCall) -> None:
        try:
            request = CallIn.model_validate_json(call.request)

            async def renew() -> bool:
                until = self._clock.now_ms() + round(request.timeout * 1000) + LEASE_GRACE_MS
                return await self._tasks.renew_call(call.queue, call.task_id, until)

            result = await make_call(
                self._session,
                request,
                idempotency_key(call.task_id, call.step),
                max_body=self._max_body,
                allow_private=self._allow_private,
                before_retry=renew,
            )
            if result is None:
                return
            resumed = await asyncio.shield(
                self._tasks.resume_call(
                    call.queue, call.task_id, call.step, result, self._clock.now_ms()
                )
            )
            if resumed:
                self._on_ready(call.queue)
        except asyncio.CancelledError:
            raise
        except Exception:  # Redis unreachable, say: the lease runs out, another try comes
            log.exception("the call of task %s (step %s) failed", call.task_id, call.step)

    async def settled(self) -> None:
        """Wait until every call in flight now has ended (its result recorded, or not)."""
        await asyncio.gather(*self._running, return_exceptions=True)

    async def close(self) -> None:
        """Stop the calls in flight (each one's lease runs out; a recoverer makes it again)."""
        for task in list(self._running):
            task.cancel()
        await self.settled()
