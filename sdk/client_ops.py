"""The operator methods of :class:`~sdk.client.Client` and :class:`~sdk.client.AsyncClient`.

Dead letters (list, resubmit), scheduled and running tasks, and cleaning finished tasks: the
calls of :mod:`sdk.api_ops`, as two mixins the clients inherit. A mixin only builds the call;
the client's own ``_send`` executes it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from sdk import lazy

if TYPE_CHECKING:
    from sdk import api_ops
    from sdk.api import Call
    from sdk.api_ops import Moment
    from sdk.wire import (
        CleanResult,
        DeadLetterFilter,
        ResubmitResult,
        RunningList,
        ScheduledPage,
        SessionsEnded,
        TaskPage,
        TaskState,
    )
else:  # loaded on first use, so that `from sdk import Client` stays light (sdk/lazy.py)
    api_ops = lazy.module("sdk.api_ops")

__all__ = ["AsyncOperatorMethods", "OperatorMethods"]

T = TypeVar("T")


class OperatorMethods:
    """What an operator does with a blocking :class:`~sdk.client.Client`."""

    def _send(self, call: Call[T]) -> T:
        raise NotImplementedError

    def dead_letters(
        self,
        queue: str | None = None,
        name: str | None = None,
        version: str | None = None,
        owner: str | None = None,
        since: Moment | None = None,
        until: Moment | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> TaskPage:
        """Dead tasks (of every queue unless ``queue``), oldest death first, with attempts.

        ``since``/``until`` bound when they died: aware datetimes or RFC 3339 strings.
        Pass the page's ``next_cursor`` as ``cursor`` for the next page.
        """
        call = api_ops.dead_letters(queue, name, version, owner, since, until, limit, cursor)
        return self._send(call)

    def resubmit(
        self,
        ids: Iterable[str] | None = None,
        *,
        filter: DeadLetterFilter | Mapping[str, Any] | None = None,
        limit: int = 1000,
        reset_attempts: bool = True,
    ) -> ResubmitResult:
        """Queue dead tasks again: the given ``ids``, or up to ``limit`` matching ``filter``
        (e.g. ``{"queue": "emails", "name": "send"}``). Ids that are not dead letters are
        skipped, each with its reason. ``reset_attempts=False`` keeps the attempt count."""
        return self._send(api_ops.resubmit(ids, filter, limit, reset_attempts))

    def scheduled(self, queue: str, limit: int = 100, cursor: str | None = None) -> ScheduledPage:
        """A queue's tasks waiting for their time: delayed ones and retries in backoff."""
        return self._send(api_ops.scheduled(queue, limit, cursor))

    def running(
        self, queue: str | None = None, owner: str | None = None, limit: int = 500
    ) -> RunningList:
        """Running tasks (of every queue unless ``queue``): endpoint, elapsed time, last
        heartbeat, progress, and whether they stalled."""
        return self._send(api_ops.running(queue, owner, limit))

    def clean(
        self,
        queue: str,
        states: Iterable[TaskState | str] | None = None,
        name: str | None = None,
        older_than: float | timedelta = 0,
        limit: int = 10_000,
        owner: str | None = None,
    ) -> CleanResult:
        """Delete a queue's finished tasks now, before their retention ends: those in
        ``states`` (every finished state by default), of task ``name`` and of ``owner`` if given,
        finished at least ``older_than`` seconds ago, at most ``limit`` of them."""
        return self._send(api_ops.clean(queue, states, name, older_than, limit, owner))

    def end_sessions(self, key_name: str) -> SessionsEnded:
        """End every admin UI session opened with the API key named ``key_name`` (its name in
        ``JOBGATE_API_KEYS``), on every gateway; the key stays valid."""
        return self._send(api_ops.end_key_sessions(key_name))


class AsyncOperatorMethods:
    """The asyncio twin of :class:`OperatorMethods`, for :class:`~sdk.client.AsyncClient`."""

    async def _send(self, call: Call[T]) -> T:
        raise NotImplementedError

    async def dead_letters(
        self,
        queue: str | None = None,
        name: str | None = None,
        version: str | None = None,
        owner: str | None = None,
        since: Moment | None = None,
        until: Moment | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> TaskPage:
        call = api_ops.dead_letters(queue, name, version, owner, since, until, limit, cursor)
        return await self._send(call)

    async def resubmit(
        self,
        ids: Iterable[str] | None = None,
        *,
        filter: DeadLetterFilter | Mapping[str, Any] | None = None,
        limit: int = 1000,
        reset_attempts: bool = True,
    ) -> ResubmitResult:
        return await self._send(api_ops.resubmit(ids, filter, limit, reset_attempts))

    async def scheduled(
        self, queue: str, limit: int = 100, cursor: str | None = None
    ) -> ScheduledPage:
        return await self._send(api_ops.scheduled(queue, limit, cursor))

    async def running(
        self, queue: str | None = None, owner: str | None = None, limit: int = 500
    ) -> RunningList:
        return await self._send(api_ops.running(queue, owner, limit))

    async def clean(
        self,
        queue: str,
        states: Iterable[TaskState | str] | None = None,
        name: str | None = None,
        older_than: float | timedelta = 0,
        limit: int = 10_000,
        owner: str | None = None,
    ) -> CleanResult:
        return await self._send(api_ops.clean(queue, states, name, older_than, limit, owner))

    async def end_sessions(self, key_name: str) -> SessionsEnded:
        return await self._send(api_ops.end_key_sessions(key_name))
