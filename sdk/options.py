"""What enqueueing a run takes beside its arguments, and what can enqueue one.

:class:`EnqueueOptions` is shared by :meth:`sdk.tasks.TaskFunction.apply` and
:class:`sdk.groups.TaskSignature`; :class:`Enqueuer` is what a signature needs of its task
function, so that :mod:`sdk.groups` depends on this small contract and not on :mod:`sdk.tasks`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, TypedDict, Unpack

from sdk.client import AsyncClient, Client
from sdk.handles import AsyncTaskHandle, TaskHandle

if TYPE_CHECKING:
    from sdk.wire import CancelOn, Debounce, TaskCreate, Throttle

__all__ = ["EnqueueOptions", "Enqueuer"]


class EnqueueOptions(TypedDict, total=False):
    """What :meth:`TaskFunction.apply` and :meth:`TaskFunction.create` take beside the
    arguments, each a :class:`~sdk.wire.TaskCreate` field (``task_id`` is its ``id``).

    ``delay`` (seconds) or ``run_at`` postpone the run. ``dedup_key``: enqueueing again with
    the key (within the queue's dedup window) returns the first task, whose handle says
    ``deduplicated``; ``singleton_key``: at most one queued task per key; ``concurrency_key``:
    the run's key under the queue's ``key_concurrency`` (at most so many running per key),
    instead of the payload's value at the policy's path. ``debounce`` (a
    :class:`~sdk.wire.Debounce` or its fields as a dict: ``key``, ``window``, ``max_wait``):
    a later enqueue of the key inside the window replaces the pending task's payload and moves
    its start, and its handle says ``replaced``; ``throttle`` (:class:`~sdk.wire.Throttle`:
    ``key``, ``window``, ``limit``, ``mode``): enqueues over the limit are dropped or delayed,
    and the handle says ``throttled`` (docs/durable.md). ``depends_on``: task
    ids or handles (of any queue) that must succeed first; ``group`` joins a group of the
    queue, ``after_group`` waits until every member of one has succeeded (see
    :func:`sdk.groups.group`). ``capability``: only endpoints advertising it get the task;
    ``owner`` and ``version`` label it; ``notify``: a URL told when the task ends (a signed
    :class:`~sdk.wire.TaskNotice`, see :func:`sdk.verify_notice`); ``cancel_on``
    (:class:`~sdk.wire.CancelOn`, or dicts of ``event`` and ``match``): events that cancel
    the run (docs/durable.md, "Cancel on event"). The rest override the
    decorator's defaults and the queue's policy for this run.
    """

    delay: float | None
    run_at: datetime | None
    priority: int | None
    max_attempts: int | None
    lease_timeout: float | None
    max_run_time: float | None
    max_heartbeat_interval: float | None
    task_id: str | None
    dedup_key: str | None
    singleton_key: str | None
    concurrency_key: str | None
    debounce: Debounce | Mapping[str, Any] | None
    throttle: Throttle | Mapping[str, Any] | None
    depends_on: Sequence[str | TaskHandle | AsyncTaskHandle] | None
    group: str | None
    after_group: str | None
    capability: str | None
    owner: str | None
    version: str | None
    notify: str | None
    cancel_on: Sequence[CancelOn | Mapping[str, Any]] | None


class Enqueuer(Protocol):
    """A task function as a :class:`~sdk.groups.TaskSignature` uses it."""

    @property
    def name(self) -> str: ...

    @property
    def queue(self) -> str: ...

    def create(
        self,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        **options: Unpack[EnqueueOptions],
    ) -> TaskCreate: ...

    def apply(
        self,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        **options: Unpack[EnqueueOptions],
    ) -> TaskHandle: ...

    async def apply_async(
        self,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        **options: Unpack[EnqueueOptions],
    ) -> AsyncTaskHandle: ...

    def client(self) -> Client: ...

    def async_client(self) -> AsyncClient: ...
