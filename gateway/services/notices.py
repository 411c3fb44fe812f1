"""Completion callbacks as producers see them: the secret that signs a queue's notices."""

from __future__ import annotations

from gateway.core.errors import QueueNotFound
from gateway.services.queues import overlap_end_ms
from gateway.store.clock import Clock
from gateway.store.notices import NoticeStore, new_notify_secret
from gateway.store.records import to_datetime
from sdk.wire import NotifySecret, SecretRotation


class NoticeService:
    def __init__(self, notices: NoticeStore, clock: Clock) -> None:
        self._notices = notices
        self._clock = clock

    async def secret(self, queue: str) -> NotifySecret:
        """The queue's notify secret, made at first use (by this call or the first delivery)."""
        found = await self._notices.secret_and_overlap(queue, self._clock.now_ms())
        if found is None:
            raise QueueNotFound(queue)
        secret, until = found
        return NotifySecret(
            queue=queue,
            secret=secret,
            previous_secret_until=None if until is None else to_datetime(until),
        )

    async def rotate(self, queue: str, spec: SecretRotation) -> NotifySecret:
        """A new notify secret for the queue; notices are signed with the previous one too for
        ``spec.overlap`` seconds (0: the previous one stops at once, after a leak)."""
        until = overlap_end_ms(spec, self._clock.now_ms())
        if not await self._notices.rotate_secret(queue, new_notify_secret(), until):
            raise QueueNotFound(queue)
        return await self.secret(queue)
