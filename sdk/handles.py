"""Handles of enqueued tasks: :class:`TaskHandle` (blocking) and :class:`AsyncTaskHandle`.

A handle is what an enqueue returns: the task's id, its state and ``deduplicated`` as the
gateway answered them, and the client to ask again through — its state, its result
(long-polled, not a sleep loop), cancel. ``.delay()`` and ``.apply()`` ask the gateway for
those three fields only (a :class:`~sdk.wire.TaskReceipt`, ``Prefer: return=minimal``), so the
handle holds the task's whole record (``task``) once it has asked for it: ``get()``,
``status()``, ``result()`` and ``cancel()`` do, and a blocking handle's ``task`` fetches it on
first read. A handle made from a whole Task (an enqueue with ``wait``) holds it at once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sdk import lazy
from sdk.client import AsyncClient, Client
from sdk.errors import JobgateError, TaskFailed

if TYPE_CHECKING:
    from sdk import wire
    from sdk.wire import Task, TaskReceipt, TaskState
else:  # loaded on first use, so that `from sdk import Client` stays light (sdk/lazy.py)
    wire = lazy.module("sdk.wire")

__all__ = ["AsyncTaskHandle", "TaskHandle"]


def result_of(task: Task) -> Any:
    """The result of a finished task; :class:`~sdk.errors.TaskFailed` unless it succeeded."""
    if task.state is wire.TaskState.SUCCEEDED:
        return task.result
    raise TaskFailed(task)


class _Handle:
    def __init__(self, task: Task | TaskReceipt) -> None:
        self.id = task.id
        self.deduplicated = task.deduplicated
        self.state = task.state
        """The task's state when last seen: at the enqueue, or the last request about it."""
        self._task = task if isinstance(task, wire.Task) else None
        self.replaced = bool(task.flow and task.flow.replaced)
        self.debounce_seq = task.flow.debounce_seq if task.flow else None
        """This enqueue's number in its debounce burst (``task.flow.debounce_seq`` is the
        task's count when last read, which later enqueues raise)."""
        self.throttled = task.flow.throttled if task.flow else None

    def _seen(self, task: Task) -> Task:
        self._task = task
        self.state = task.state
        return task

    def _succeeded(self) -> Task | None:
        """The task's record if it holds it and it has succeeded: no need to wait."""
        if self._task is not None and self._task.state is wire.TaskState.SUCCEEDED:
            return self._task
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.id!r}, state={self.state.value!r})"


class TaskHandle(_Handle):
    """An enqueued task, seen through a :class:`~sdk.client.Client`.

    ``deduplicated`` is True when the enqueue matched an earlier task by its dedup or singleton
    key: the handle is then that earlier task's, and nothing new was stored. ``replaced`` is
    True when a debounce merged the enqueue into the pending task the handle names, which
    keeps its first enqueue's options (only the payload and run_at are this enqueue's);
    ``debounce_seq`` is this enqueue's number in the burst (None without debounce); ``throttled`` is
    ``"dropped"`` (nothing stored: the handle names the task the window let through) or
    ``"delayed"`` (stored to run in a later window), else None.
    """

    def __init__(self, task: Task | TaskReceipt, client: Client) -> None:
        super().__init__(task)
        self._client = client

    @property
    def task(self) -> Task:
        """The task's record as last fetched; the first read fetches it when the enqueue
        answered with a receipt."""
        return self._task if self._task is not None else self.get()

    def get(self) -> Task:
        """The task's current record."""
        return self._seen(self._client.get_task(self.id))

    def status(self) -> TaskState:
        return self.get().state

    def result(self, timeout: float = 30.0) -> Any:
        """The task's JSON result, once it has succeeded (long-polling up to ``timeout`` s).

        Raises :class:`~sdk.errors.TaskFailed` if it ended failed, dead or cancelled, and
        :class:`~sdk.errors.TaskTimeout` if it has not finished in time. A handle that already
        holds the succeeded task (an enqueue with ``wait``) answers without a request.
        """
        task = self._succeeded() or self._seen(self._client.wait(self.id, timeout))
        return result_of(task)

    def cancel(self) -> Task:
        return self._seen(self._client.cancel(self.id))


class AsyncTaskHandle(_Handle):
    """An enqueued task, seen through an :class:`~sdk.client.AsyncClient`."""

    def __init__(self, task: Task | TaskReceipt, client: AsyncClient) -> None:
        super().__init__(task)
        self._client = client

    @property
    def task(self) -> Task:
        """The task's record as last fetched (``await handle.get()`` fetches it: a handle of
        ``.delay_async()`` holds none until then, and raises :class:`~sdk.errors.JobgateError`
        here)."""
        if self._task is None:
            raise JobgateError(
                f"task {self.id}: the enqueue answered with its id and state only; "
                "await handle.get() for its whole record"
            )
        return self._task

    async def get(self) -> Task:
        return self._seen(await self._client.get_task(self.id))

    async def status(self) -> TaskState:
        return (await self.get()).state

    async def result(self, timeout: float = 30.0) -> Any:
        """Like :meth:`TaskHandle.result`."""
        task = self._succeeded() or self._seen(await self._client.wait(self.id, timeout))
        return result_of(task)

    async def cancel(self) -> Task:
        return self._seen(await self._client.cancel(self.id))
