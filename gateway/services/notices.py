"""Completion callbacks as producers see them: the secret that signs a queue's notices."""

from __future__ import annotations

from gateway.errors import QueueNotFound
from gateway.store.notices import NoticeStore
from sdk.wire import NotifySecret


class NoticeService:
    def __init__(self, notices: NoticeStore) -> None:
        self._notices = notices

    async def secret(self, queue: str) -> NotifySecret:
        """The queue's notify secret, made at first use (by this call or the first delivery)."""
        secret = await self._notices.secret(queue)
        if secret is None:
            raise QueueNotFound(queue)
        return NotifySecret(queue=queue, secret=secret)
