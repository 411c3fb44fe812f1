"""The task methods of :class:`~sdk.client.Client` and :class:`~sdk.client.AsyncClient`.

Enqueue (one task, a batch, answered whole or with receipts only), read, list, cancel and wait
for tasks, their logs, and the secret that signs a queue's completion callbacks: the calls of
:mod:`sdk.api`, as two mixins the clients inherit. A mixin only builds the call; the client's
own ``_send`` (``_drive`` for several requests) executes it, and its coalescer may carry a
single enqueue in a batch request (:mod:`sdk.coalescing`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from sdk import lazy

if TYPE_CHECKING:
    from pydantic import JsonValue

    from sdk import api, wire
    from sdk.coalescing import AsyncCoalescer, BlockingCoalescer
    from sdk.wire import (
        LogLine,
        NotifySecret,
        Task,
        TaskCreate,
        TaskPage,
        TaskReceipt,
        TaskState,
    )
else:  # loaded on first use, so that `from sdk import Client` stays light (sdk/lazy.py)
    api = lazy.module("sdk.api")
    wire = lazy.module("sdk.wire")

__all__ = ["AsyncTaskMethods", "TaskMethods"]

T = TypeVar("T")


def _task(name: str, payload: JsonValue, options: Mapping[str, Any]) -> TaskCreate:
    return wire.TaskCreate.model_validate({"name": name, "payload": payload, **options})


class TaskMethods:
    """Tasks with a blocking :class:`~sdk.client.Client`."""

    _coalescer: BlockingCoalescer

    def _send(self, call: api.Call[T]) -> T:
        raise NotImplementedError

    def _drive(self, plan: api.Plan[T]) -> T:
        raise NotImplementedError

    @property
    def _coalesces(self) -> bool:
        raise NotImplementedError

    def enqueue(
        self,
        queue: str,
        name: str,
        payload: JsonValue = None,
        *,
        wait: float | None = None,
        **options: Any,
    ) -> Task:
        """Enqueue one task; ``options`` are :class:`~sdk.wire.TaskCreate` fields. With
        ``wait`` (seconds, at most 60), the answer comes once the task has finished (with its
        result) or the wait has run out: one request instead of an enqueue and a long poll."""
        return self.enqueue_task(queue, _task(name, payload, options), wait=wait)

    def enqueue_task(self, queue: str, task: TaskCreate, *, wait: float | None = None) -> Task:
        """:meth:`enqueue` of a request built already (``TaskFunction.create``); it may share
        a batch request with other threads' enqueues (not with ``wait``; see the class)."""
        if wait is None and self._coalesces:
            return self._coalescer.enqueue(queue, task)
        return self._send(api.enqueue(queue, task, wait))

    def enqueue_receipt(self, queue: str, task: TaskCreate) -> TaskReceipt:
        """:meth:`enqueue_task` answered with the task's id, state and ``deduplicated`` only
        (``Prefer: return=minimal``): what ``.delay()`` and ``.apply()`` send. It may share a
        batch request with other threads' enqueues, as :meth:`enqueue_task` does."""
        if self._coalesces:
            return self._coalescer.enqueue_receipt(queue, task)
        return self._send(api.enqueue_receipt(queue, task))

    def enqueue_batch(self, queue: str, tasks: list[TaskCreate]) -> list[Task]:
        """Enqueue up to 1000 tasks in one request: all are stored, or none."""
        return self._send(api.enqueue_batch(queue, tasks))

    def enqueue_batch_receipts(self, queue: str, tasks: list[TaskCreate]) -> list[TaskReceipt]:
        """:meth:`enqueue_batch` answered with a :class:`~sdk.wire.TaskReceipt` per task (id,
        state, ``deduplicated``): the gateway writes, and this client reads, about 700 bytes
        less per task."""
        return self._send(api.enqueue_batch_receipts(queue, tasks))

    def get_task(self, task_id: str, wait: float | None = None) -> Task:
        """A task; with ``wait``, the server holds the answer until it finishes (≤ 60 s)."""
        return self._send(api.get_task(task_id, wait))

    def list_tasks(
        self,
        queue: str,
        state: TaskState | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        owner: str | None = None,
    ) -> TaskPage:
        """One page of a queue's tasks in ``state`` (queued by default), of ``owner`` if given;
        pass the page's ``next_cursor`` as ``cursor`` for the next one."""
        return self._send(api.list_tasks(queue, state, limit, cursor, owner))

    def cancel(self, task_id: str) -> Task:
        """Cancel a task: at once if not running, else at its next heartbeat."""
        return self._send(api.cancel(task_id))

    def logs(self, task_id: str) -> list[LogLine]:
        return self._send(api.logs(task_id))

    def notify_secret(self, queue: str) -> str:
        """The secret that signs the queue's completion callbacks (:func:`sdk.verify_notice`)."""
        return self._send(api.notify_secret(queue))

    def rotate_notify_secret(self, queue: str, overlap: float = 86_400) -> NotifySecret:
        """A new secret for the queue's completion callbacks. For ``overlap`` seconds notices
        are signed with the previous secret too: give receivers the new one meanwhile
        (``verify_notice(body, headers, [new, previous])`` accepts either)."""
        return self._send(api.rotate_notify_secret(queue, overlap))

    def wait(self, task_id: str, timeout: float) -> Task:
        """Long-poll until the task has finished; :class:`~sdk.errors.TaskTimeout` if not."""
        return self._drive(api.wait(task_id, timeout))


class AsyncTaskMethods:
    """The asyncio twin of :class:`TaskMethods`, for :class:`~sdk.client.AsyncClient`."""

    _coalescer: AsyncCoalescer

    async def _send(self, call: api.Call[T]) -> T:
        raise NotImplementedError

    async def _drive(self, plan: api.Plan[T]) -> T:
        raise NotImplementedError

    @property
    def _coalesces(self) -> bool:
        raise NotImplementedError

    async def enqueue(
        self,
        queue: str,
        name: str,
        payload: JsonValue = None,
        *,
        wait: float | None = None,
        **options: Any,
    ) -> Task:
        return await self.enqueue_task(queue, _task(name, payload, options), wait=wait)

    async def enqueue_task(
        self, queue: str, task: TaskCreate, *, wait: float | None = None
    ) -> Task:
        if wait is None and self._coalesces:
            return await self._coalescer.enqueue(queue, task)
        return await self._send(api.enqueue(queue, task, wait))

    async def enqueue_receipt(self, queue: str, task: TaskCreate) -> TaskReceipt:
        """Like :meth:`Client.enqueue_receipt`."""
        if self._coalesces:
            return await self._coalescer.enqueue_receipt(queue, task)
        return await self._send(api.enqueue_receipt(queue, task))

    async def enqueue_batch(self, queue: str, tasks: list[TaskCreate]) -> list[Task]:
        return await self._send(api.enqueue_batch(queue, tasks))

    async def enqueue_batch_receipts(
        self, queue: str, tasks: list[TaskCreate]
    ) -> list[TaskReceipt]:
        """Like :meth:`Client.enqueue_batch_receipts`."""
        return await self._send(api.enqueue_batch_receipts(queue, tasks))

    async def get_task(self, task_id: str, wait: float | None = None) -> Task:
        return await self._send(api.get_task(task_id, wait))

    async def list_tasks(
        self,
        queue: str,
        state: TaskState | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        owner: str | None = None,
    ) -> TaskPage:
        return await self._send(api.list_tasks(queue, state, limit, cursor, owner))

    async def cancel(self, task_id: str) -> Task:
        return await self._send(api.cancel(task_id))

    async def logs(self, task_id: str) -> list[LogLine]:
        return await self._send(api.logs(task_id))

    async def notify_secret(self, queue: str) -> str:
        return await self._send(api.notify_secret(queue))

    async def rotate_notify_secret(self, queue: str, overlap: float = 86_400) -> NotifySecret:
        return await self._send(api.rotate_notify_secret(queue, overlap))

    async def wait(self, task_id: str, timeout: float) -> Task:
        return await self._drive(api.wait(task_id, timeout))
