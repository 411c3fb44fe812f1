"""Handles of enqueued tasks: :class:`TaskHandle` (blocking) and :class:`AsyncTaskHandle`.

A handle is what an enqueue returns: the task's record as the gateway answered it, and the
client to ask again through — its state, its result (long-polled, not a sleep loop), cancel.
"""

from __future__ import annotations

from typing import Any

from sdk.client import AsyncClient, Client
from sdk.errors import TaskFailed
from sdk.wire import Task, TaskState

__all__ = ["AsyncTaskHandle", "TaskHandle"]


def result_of(task: Task) -> Any:
    """The result of a finished task; :class:`~sdk.errors.TaskFailed` unless it succeeded."""
    if task.state is TaskState.SUCCEEDED:
        return task.result
    raise TaskFailed(task)


class _Handle:
    def __init__(self, task: Task) -> None:
        self.task = task
        self.deduplicated = task.deduplicated
        self.replaced = bool(task.flow and task.flow.replaced)
        self.throttled = task.flow.throttled if task.flow else None

    @property
    def id(self) -> str:
        return self.task.id

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.id!r}, name={self.task.name!r})"


class TaskHandle(_Handle):
    """An enqueued task, seen through a :class:`~sdk.client.Client`.

    ``deduplicated`` is True when the enqueue matched an earlier task by its dedup or singleton
    key: the handle is then that earlier task's, and nothing new was stored. ``replaced`` is
    True when a debounce merged the enqueue into the pending task the handle names (its
    ``task.flow.debounce_seq`` is this enqueue's number in the burst); ``throttled`` is
    ``"dropped"`` (nothing stored: the handle names the task the window let through) or
    ``"delayed"`` (stored to run in a later window), else None.
    """

    def __init__(self, task: Task, client: Client) -> None:
        super().__init__(task)
        self._client = client

    def get(self) -> Task:
        """The task's current record."""
        self.task = self._client.get_task(self.id)
        return self.task

    def status(self) -> TaskState:
        return self.get().state

    def result(self, timeout: float = 30.0) -> Any:
        """The task's JSON result, once it has succeeded (long-polling up to ``timeout`` s).

        Raises :class:`~sdk.errors.TaskFailed` if it ended failed, dead or cancelled, and
        :class:`~sdk.errors.TaskTimeout` if it has not finished in time. A handle that already
        holds the succeeded task (an enqueue with ``wait``) answers without a request.
        """
        if self.task.state is not TaskState.SUCCEEDED:
            self.task = self._client.wait(self.id, timeout)
        return result_of(self.task)

    def cancel(self) -> Task:
        self.task = self._client.cancel(self.id)
        return self.task


class AsyncTaskHandle(_Handle):
    """An enqueued task, seen through an :class:`~sdk.client.AsyncClient`."""

    def __init__(self, task: Task, client: AsyncClient) -> None:
        super().__init__(task)
        self._client = client

    async def get(self) -> Task:
        self.task = await self._client.get_task(self.id)
        return self.task

    async def status(self) -> TaskState:
        return (await self.get()).state

    async def result(self, timeout: float = 30.0) -> Any:
        """Like :meth:`TaskHandle.result`."""
        if self.task.state is not TaskState.SUCCEEDED:
            self.task = await self._client.wait(self.id, timeout)
        return result_of(self.task)

    async def cancel(self) -> Task:
        self.task = await self._client.cancel(self.id)
        return self.task
