"""Delivering completion callbacks: the signed POST of a :class:`~sdk.wire.TaskNotice` to a
finished task's ``notify`` URL, at least once.

A notice is recorded by the script that ends the task (``gateway/store/notices.py``), so it
survives any gateway stopping. :class:`NoticeDelivery` runs in every gateway: each
:meth:`~NoticeDelivery.step` reads the queues with notices due (one command), claims their due
notices under a lease (``timeout`` plus a margin: a gateway that stops mid-delivery leaves the
notice to be claimed again when the lease ends), and POSTs each over the pushes' guarded
session (SSRF rules at every connection, no redirects). A 2xx answer delivers it; anything else
is tried again after an exponential backoff with full jitter, up to ``max_tries``, and then
recorded as failed on the task. A notice on a pooled keep-alive connection that the receiver
closed under it, unanswered, goes once more at once on a new connection, as a push does. A
receiver may see a notice more than once (a lost answer, a lease that ran out, that resend);
``webhook-id`` is the same on every try so it can drop repeats.

Tests drive :meth:`~NoticeDelivery.step` with a manual clock and :meth:`~NoticeDelivery.drain`
to wait for the deliveries it started.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Sequence
from datetime import UTC, datetime

import aiohttp
from standardwebhooks import Webhook

from gateway.core.backoff import compute_backoff
from gateway.core.errors import Unavailable
from gateway.dispatch.pusher import closed_under_it, fresh_connection, mark_sent
from gateway.security.ssrf import AddressRefused
from gateway.store.clock import Clock
from gateway.store.failures import as_gateway_error
from gateway.store.notices import ClaimedNotice, NoticeStore
from gateway.store.records import final_error, load_json, to_datetime
from sdk.wire import Backoff, BackoffStrategy, TaskNotice, TaskState

__all__ = ["NoticeDelivery", "notice_body"]

logger = logging.getLogger(__name__)

LEASE_MARGIN_MS = 5_000
RESCAN_MS = 60_000
QUEUES_PER_STEP = 100


def notice_body(notice: ClaimedNotice) -> str:
    """The TaskNotice JSON for a claimed notice."""
    record = notice.record
    return TaskNotice(
        id=notice.task_id,
        queue=notice.queue,
        name=record["name"],
        state=TaskState(record["state"]),
        result=load_json(notice.result_json),
        error=final_error(record),
        attempt=record["att"],
        finished_at=to_datetime(notice.finished_ms),
        owner=record.get("own"),
    ).model_dump_json()


class NoticeDelivery:
    def __init__(
        self,
        store: NoticeStore,
        session: aiohttp.ClientSession,
        clock: Clock,
        *,
        timeout: float,
        max_tries: int,
        retry_delay: float,
        max_retry_delay: float,
        rng: random.Random,
        max_in_flight: int = 64,
    ) -> None:
        self._store = store
        self._session = session
        self._clock = clock
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._lease_ms = round(timeout * 1000) + LEASE_MARGIN_MS
        self._max_tries = max_tries
        self._backoff = Backoff(
            strategy=BackoffStrategy.EXPONENTIAL_JITTER,
            base_delay=retry_delay,
            max_delay=max_retry_delay,
        )
        self._rng = rng
        self._max_in_flight = max_in_flight
        self._in_flight: set[asyncio.Task[None]] = set()
        self._rescanned_ms: int | None = None
        self._failing = False  # the last tick failed: its streak is logged once

    async def tick(self) -> bool:
        """One :meth:`step` now, logging a failure instead of raising; returns whether it
        worked."""
        try:
            await self.step(self._clock.now_ms())
        except Exception:
            if not self._failing:
                logger.exception("completion callback delivery step failed")
            self._failing = True
            return False
        if self._failing:
            logger.warning("completion callback delivery works again")
        self._failing = False
        return True

    async def step(self, now_ms: int) -> int:
        """Claim the notices due by ``now_ms`` (as many as there is room for in flight) and
        start delivering them; returns how many were started. The first step, and one a minute
        after, rebuilds the index of queues with notices first."""
        if self._rescanned_ms is None or now_ms - self._rescanned_ms >= RESCAN_MS:
            await self._store.rescan()
            self._rescanned_ms = now_ms
        started = 0
        for queue in await self._store.due_queues(now_ms, QUEUES_PER_STEP):
            room = self._max_in_flight - len(self._in_flight)
            if room <= 0:
                break
            try:
                claim = await self._store.claim(queue, now_ms, self._lease_ms, room)
                if claim is None:
                    continue
                await self._store.reindex(queue, claim.next_due_ms)
            except Exception as e:
                if isinstance(as_gateway_error(e), Unavailable):
                    raise  # Redis did not answer: the step failed (tried again soon)
                # One broken queue must not hold up the others' notices.
                logger.exception("claiming the completion callbacks of queue %r failed", queue)
                continue
            for notice in claim.notices:
                task = asyncio.create_task(self._deliver(notice, claim.secrets))
                self._in_flight.add(task)
                task.add_done_callback(self._in_flight.discard)
            started += len(claim.notices)
        return started

    async def drain(self) -> None:
        """Wait for the deliveries under way."""
        while self._in_flight:
            await asyncio.gather(*self._in_flight, return_exceptions=True)

    async def stop(self) -> None:
        """Abandon deliveries under way: their leases run out and a gateway claims them
        again, so nothing is lost."""
        for task in self._in_flight:
            task.cancel()
        await asyncio.gather(*self._in_flight, return_exceptions=True)

    async def _deliver(self, notice: ClaimedNotice, secrets: Sequence[str]) -> None:
        try:
            error = await self._post(notice, secrets)
            now = self._clock.now_ms()
            if error is None:
                await self._store.settle(notice, "delivered", now)
            elif notice.tries >= self._max_tries:
                logger.warning(
                    "gave up the completion callback of task %s to %s after %d tries: %s",
                    notice.task_id,
                    notice.url,
                    notice.tries,
                    error,
                )
                await self._store.settle(notice, "failed", now, error=error)
            else:
                delay = compute_backoff(notice.tries, self._backoff, self._rng)
                retry_at = now + round(delay * 1000)
                await self._store.settle(notice, "retry", now, retry_at_ms=retry_at, error=error)
        except Exception:
            # Left leased: claimed again when the lease ends.
            logger.exception("completion callback of task %s", notice.task_id)

    async def _post(self, notice: ClaimedNotice, secrets: Sequence[str]) -> str | None:
        """POST the notice, signed with each secret (two during a rotation's overlap, separated
        by a space as Standard Webhooks allows); None when the receiver answered 2xx, else
        what went wrong."""
        body = notice_body(notice)
        sent_at = datetime.fromtimestamp(int(time.time()), tz=UTC)
        headers = {
            "content-type": "application/json",
            "webhook-id": notice.message_id,
            "webhook-timestamp": str(int(sent_at.timestamp())),
            "webhook-signature": " ".join(
                Webhook(secret).sign(notice.message_id, sent_at, body) for secret in secrets
            ),
        }
        return await self._send(notice.url, body.encode(), headers)

    async def _send(
        self, url: str, data: bytes, headers: dict[str, str], again: bool = True
    ) -> str | None:
        """One POST, and once more on a new connection when a pooled keep-alive one was closed
        under it before any answer (the receiver's idle timeout crossing it on the wire: it
        never read the notice), as a push is (:meth:`Pusher._send`), so that race spends no try
        and waits no backoff."""
        mark_sent()
        answered = False
        try:
            async with self._session.post(
                url, data=data, headers=headers, allow_redirects=False, timeout=self._timeout
            ) as response:
                answered = True
                if 200 <= response.status < 300:
                    return None
                return f"answered {response.status}"
        except TimeoutError:
            return f"no answer within {self._timeout.total:g}s"
        except (aiohttp.ClientError, OSError) as e:
            if again and not answered and closed_under_it(e):
                with fresh_connection():
                    return await self._send(url, data, headers, again=False)
            if isinstance(e, aiohttp.ClientConnectorError) and isinstance(
                e.os_error, AddressRefused
            ):
                return f"refused: {e.os_error}"
            return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
