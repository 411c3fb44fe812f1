"""One attempt's callbacks to the gateway: heartbeat, checkpoint, logs, and the final word —
the result, the error, or a release (the task handed back to the queue at shutdown).

Every callback is ``POST <callback base>/<kind>`` with the lease token in the ``jobgate-lease``
header. A 409 (or 403) answer means the lease is stale — the task was dispatched again — and
the gateway's own 404 for the task or its queue means it was deleted while it ran (a forced
queue delete): either way :class:`CallbackChannel` raises :class:`~sdk.errors.LeaseLost` and
sends nothing more. A 404 that is not the gateway's (a proxy's, a wrong callback base) is an
ordinary error.

A gateway that cannot answer for now -- a 5xx (its Redis restarting: 503), a connection refused
or reset (the gateway itself restarting) -- is asked again: the final word after each of
:data:`FINAL_RETRY_DELAYS`, and the callbacks the task waits for (heartbeat, checkpoint, step,
logs) after :data:`CALL_RETRY_DELAYS` for as long as the lease lasts, since past it the gateway
gives the task to another attempt anyway. Each of them is safe to send twice: a heartbeat and a
checkpoint set what they carry, a step already recorded keeps its first result, and at worst a
log line whose answer was lost is stored twice.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from pydantic import BaseModel, JsonValue

from sdk.api import problem_of, read_answer
from sdk.errors import ApiError, LeaseLost
from sdk.wire import (
    HEADER_LEASE,
    CallIn,
    CheckpointIn,
    ErrorIn,
    HeartbeatIn,
    HeartbeatOut,
    InvokeIn,
    LogIn,
    LogLine,
    ResultIn,
    SleepIn,
    StepIn,
    StepOut,
    WaitIn,
)

if TYPE_CHECKING:
    from sdk.sessions import Answer, Session

__all__ = ["CALL_RETRY_DELAYS", "FINAL_RETRY_DELAYS", "CallbackChannel"]

log = logging.getLogger(__name__)

FINAL_RETRY_DELAYS = (0.5, 1.0, 2.0, 4.0, 8.0)
"""Pauses between tries of the final callback when the gateway cannot be reached."""
CALL_RETRY_DELAYS = (0.1, 0.25, 0.5, 1.0)
"""Pauses between tries of a heartbeat, checkpoint, step or log callback the gateway could not
answer; the last one repeats until the lease would have ended."""
DEFAULT_TIMEOUT = 10.0
"""Seconds a callback may wait for a connection, and for each read of the answer."""

_STALE = frozenset({403, 409})
# The problem titles of the gateway's 404s for a callback whose task is gone
# (gateway/core/errors.py).
_GONE = frozenset({"Task not found", "Queue not found"})


class CallbackChannel:
    """The callbacks of one attempt, and what the gateway said about its lease."""

    def __init__(
        self,
        http: Session,
        base_url: str,
        lease: str,
        lease_expires_at: datetime,
        final_retry_delays: Sequence[float] = FINAL_RETRY_DELAYS,
        timeout: float = DEFAULT_TIMEOUT,
        call_retry_delays: Sequence[float] = CALL_RETRY_DELAYS,
    ) -> None:
        self._http = http
        self.timeout = timeout
        self._base = base_url.rstrip("/")
        self._lease = lease
        self._final_retry_delays = tuple(final_retry_delays)
        self._call_retry_delays = tuple(call_retry_delays) or (0.0,)
        self.lease_expires_at = lease_expires_at
        self.lost = False
        self.trace_headers: dict[str, str] = {}  # the attempt's span context (traceparent)

    async def _post(self, kind: str, body: BaseModel | None) -> Answer:
        if self.lost:
            raise LeaseLost("the lease is stale: the task was dispatched again")
        response = await self._http.request(
            "POST",
            f"{self._base}/{kind}",
            content=b"{}" if body is None else body.model_dump_json(exclude_none=True).encode(),
            headers={
                HEADER_LEASE: self._lease,
                "content-type": "application/json",
                **self.trace_headers,
            },
            timeout=self.timeout,
        )
        if response.status_code in _STALE:
            self.lost = True
            raise LeaseLost(f"{kind} callback refused ({response.status_code}): the lease is stale")
        if not response.is_success:
            problem = problem_of(response)
            if response.status_code == 404 and problem.title in _GONE:
                self.lost = True
                raise LeaseLost(f"{kind} callback refused: {problem.detail or problem.title}")
            raise ApiError(response.status_code, problem)
        return response

    async def heartbeat(self, progress: float | None) -> bool:
        response = await self._call("heartbeat", HeartbeatIn(progress=progress))
        answer = read_answer(HeartbeatOut, response.content)
        self.lease_expires_at = answer.lease_expires_at
        return answer.cancel_requested

    async def checkpoint(self, state: JsonValue) -> None:
        await self._call("checkpoint", CheckpointIn(state=state))

    async def step(self, name: str, result: JsonValue) -> bool:
        response = await self._call("step", StepIn(name=name, result=result))
        return read_answer(StepOut, response.content).cancel_requested

    async def log(self, message: str, level: str) -> None:
        line = LogLine(message=message[:8192], level=level[:16], at=datetime.now(UTC))
        await self._call("logs", LogIn(lines=[line]))

    async def _call(self, kind: str, body: BaseModel) -> Answer:
        """A callback the task waits for, asked again while the gateway cannot answer (a 5xx,
        a network failure) and the lease lasts; the last failure is raised once the next try
        would come after the lease's end (the gateway's word for it, as last heard)."""
        import httpx  # here, not at import: a worker that sends no callback never loads it

        tries = 0
        while True:
            try:
                return await self._post(kind, body)
            except ApiError as e:
                if e.status < 500:
                    raise
                failure: Exception = e
            except httpx.TransportError as e:
                failure = e
            delays = self._call_retry_delays
            delay = delays[min(tries, len(delays) - 1)]
            tries += 1
            if datetime.now(UTC) + timedelta(seconds=delay) >= self.lease_expires_at:
                raise failure
            log.warning("%s callback failed (%s), retrying in %gs", kind, failure, delay)
            await asyncio.sleep(delay)

    async def finish(self, final: ResultIn | ErrorIn) -> bool:
        """Send the result or error; True once the gateway has it.

        Network failures and 5xx answers are tried again after each of the retry delays; a
        stale lease, another refusal or running out of tries give up (logged, False).
        Shielded: cancelling the caller (worker shutdown) does not interrupt the sending.
        """
        kind = "result" if isinstance(final, ResultIn) else "error"
        return await asyncio.shield(self._final(kind, final))

    async def release(self) -> bool:
        """Hand the task back to the queue (the worker is shutting down): the gateway queues it
        again at once without spending an attempt. Sent like :meth:`finish`."""
        return await asyncio.shield(self._final("release", None))

    async def sleep(self, until: datetime) -> bool:
        """End the attempt with a durable sleep: the gateway pushes the task again at
        ``until`` without spending an attempt. Sent like :meth:`finish`."""
        return await asyncio.shield(self._final("sleep", SleepIn(until=until)))

    async def wait(self, wait: WaitIn | InvokeIn | CallIn) -> bool:
        """End the attempt with a wait for an event (or, given an :class:`InvokeIn`, for a
        child task it invokes; given a :class:`CallIn`, for an HTTP call the gateway makes):
        the gateway pushes the task again once a matching event arrives (the child ends, the
        call is made) or the timeout passes, without spending an attempt. Sent like
        :meth:`finish`."""
        kind = (
            "invoke"
            if isinstance(wait, InvokeIn)
            else "call"
            if isinstance(wait, CallIn)
            else "wait"
        )
        return await asyncio.shield(self._final(kind, wait))

    async def _final(self, kind: str, final: BaseModel | None) -> bool:
        import httpx  # here, not at import: a worker that sends no callback never loads it

        delays = iter(self._final_retry_delays)
        while True:
            try:
                await self._post(kind, final)
                return True
            except LeaseLost:
                log.info("%s callback dropped: the lease is stale", kind)
                return False
            except ApiError as e:
                if e.status < 500:
                    log.error("%s callback refused: %s", kind, e)
                    return False
                failure: Exception = e
            except httpx.TransportError as e:
                failure = e
            delay = next(delays, None)
            if delay is None:
                log.error("%s callback lost after retries: %s", kind, failure)
                return False
            log.warning("%s callback failed (%s), retrying in %gs", kind, failure, delay)
            await asyncio.sleep(delay)
