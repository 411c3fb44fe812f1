"""Several runs enqueued as one: :class:`TaskSignature` (a run to enqueue later) and
:func:`group`.

::

    @task("images")
    def resize(path: str, width: int) -> str: ...

    @task("images")
    def publish(album: str) -> None: ...

    job = group(resize.s("a.png", 200), resize.s("b.png", 200)).then(publish.s("summer"))
    handle = job.delay()                # one request: POST /v1/queues/images/tasks/batch
    handle.results(timeout=60)          # the members' results, in order
    handle.dependents[0].result()       # publish ran once both resizes had succeeded

``task.s(*args, **kwargs)`` checks the arguments against the function at once and enqueues
nothing; ``.set(**options)`` adds enqueue options (those of :meth:`TaskFunction.apply`).

A group is enqueued in **one batch request**, all or none: every member with ``group=<name>``
(a fresh ``group-<ULID>`` each time it is enqueued, unless ``name=`` is given), then every
dependent added by :meth:`Group.then` with ``after_group=<name>``. Since the gateway stores the
whole batch at once, a dependent never sees a group half built: it runs once every member has
succeeded, and fails if one of them fails or is cancelled. Dependents do not wait for each
other; for a dependent of a dependent, pass ``depends_on=[handle]`` in a later enqueue.

A batch request is per queue, so every member and dependent must be of one queue
(``ValueError`` otherwise), and a batch holds at most 1000 tasks.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Unpack

from sdk import lazy
from sdk.client import AsyncClient, Client
from sdk.handles import AsyncTaskHandle, TaskHandle
from sdk.options import EnqueueOptions, Enqueuer

if TYPE_CHECKING:
    import asyncio

    from pydantic import TypeAdapter

    from sdk.wire import TaskCreate
else:  # loaded on first use, so that `from sdk import task` stays light (sdk/lazy.py)
    asyncio = lazy.module("asyncio")

__all__ = ["AsyncGroupHandle", "Group", "GroupHandle", "TaskSignature", "group"]

MAX_BATCH = 1000
"""The most tasks one batch request carries (``BatchCreate``)."""


def _no_options() -> EnqueueOptions:
    return {}


@dataclass(frozen=True)
class TaskSignature:
    """One run of a task function, to enqueue later: made by ``my_task.s(*args, **kwargs)``."""

    fn: Enqueuer
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    options: EnqueueOptions = field(default_factory=_no_options)
    needs_result: str | None = None
    """Why these arguments do not fit alone, when they fit after a previous task's result: the
    run is then only a link of :func:`~sdk.chains.chain` past the first, or a chord's callback."""

    @property
    def queue(self) -> str:
        return self.fn.queue

    def set(self, **options: Unpack[EnqueueOptions]) -> TaskSignature:
        """This run with more enqueue options (given ones replace earlier ones)."""
        return replace(self, options={**self.options, **options})

    def create(self, **extra: Unpack[EnqueueOptions]) -> TaskCreate:
        """The enqueue request of this run, with ``extra`` options on top of its own."""
        options: EnqueueOptions = {**self.options, **extra}
        if self.needs_result is not None:
            raise TypeError(
                f"{self!r}: {self.needs_result} (arguments that fit only after a previous "
                "task's result: use it in chain(...) past the first, or as a chord's callback)"
            )
        return self.fn.create(self.args, self.kwargs, **options)

    def delay(self) -> TaskHandle:
        """Enqueue this run on its own."""
        self.create()  # refuses a run that needs a previous task's result
        return self.fn.apply(self.args, self.kwargs, **self.options)

    async def delay_async(self) -> AsyncTaskHandle:
        """:meth:`delay` through an :class:`~sdk.client.AsyncClient`."""
        self.create()
        return await self.fn.apply_async(self.args, self.kwargs, **self.options)

    def __repr__(self) -> str:
        call = [*map(repr, self.args), *(f"{k}={v!r}" for k, v in self.kwargs.items())]
        return f"{self.fn.name}.s({', '.join(call)})"


@functools.cache
def _group_name() -> TypeAdapter[str]:
    """The group names' validator, made at its first use, not at import (pydantic)."""
    from pydantic import TypeAdapter

    from sdk.wire import GroupName

    return TypeAdapter(GroupName)


def _check_name(name: str) -> str:
    from pydantic import ValidationError

    from sdk.wire.base import reason

    try:
        return _group_name().validate_python(name)
    except ValidationError as e:
        why = reason(e.errors(include_url=False)[0])
        raise ValueError(f"group name {name!r}: {why}") from e


def _check_options(role: str, signature: TaskSignature, *names: str) -> None:
    given = [name for name in names if signature.options.get(name) is not None]
    if given:
        raise ValueError(f"{signature!r}: a group sets the {' and '.join(given)} of its {role}")


class Group:
    """Task runs to enqueue together, in one batch request: see the module docstring."""

    def __init__(
        self,
        members: Sequence[TaskSignature],
        name: str | None = None,
        dependents: Sequence[TaskSignature] = (),
    ) -> None:
        if not members:
            raise ValueError("a group needs at least one member")
        every = [*members, *dependents]
        for signature in every:
            if not isinstance(signature, TaskSignature):
                raise TypeError(f"a group takes task runs, my_task.s(...), not {signature!r}")
            if signature.needs_result is not None:
                signature.create()  # raises: a group's tasks are not handed results
        queues = sorted({signature.queue for signature in every})
        if len(queues) > 1:
            raise ValueError(
                "every task of a group must be of one queue (a batch request is per queue); "
                f"these are of {', '.join(map(repr, queues))}"
            )
        if len(every) > MAX_BATCH:
            raise ValueError(f"a group holds at most {MAX_BATCH} tasks, members and dependents")
        for signature in members:
            _check_options("members", signature, "group", "after_group")
        for signature in dependents:
            _check_options("dependents", signature, "after_group")
        self.members = tuple(members)
        self.dependents = tuple(dependents)
        self.name = None if name is None else _check_name(name)
        self.queue = queues[0]

    def then(self, *signatures: TaskSignature) -> Group:
        """This group with dependents: runs that start once every member has succeeded
        (enqueued in the same batch, with ``after_group``)."""
        return Group(self.members, self.name, (*self.dependents, *signatures))

    def create(self, name: str) -> list[TaskCreate]:
        """The tasks of the batch request, for a group called ``name``: members, then
        dependents."""
        return [
            *(member.create(group=name) for member in self.members),
            *(dependent.create(after_group=name) for dependent in self.dependents),
        ]

    def _batch(self) -> tuple[str, list[TaskCreate]]:
        from ulid import ULID  # here: python-ulid reads its version from package metadata at import

        name = self.name or f"group-{ULID()}"
        return name, self.create(name)

    def delay(self) -> GroupHandle:
        """Enqueue the group, through the first member's client."""
        return self.apply()

    def apply(self, client: Client | None = None) -> GroupHandle:
        """Enqueue the group through ``client`` (default: the first member's client)."""
        client = client or self.members[0].fn.client()
        name, tasks = self._batch()
        handles = [TaskHandle(t, client) for t in client.enqueue_batch_receipts(self.queue, tasks)]
        count = len(self.members)
        return GroupHandle(name, handles[:count], handles[count:])

    async def delay_async(self) -> AsyncGroupHandle:
        """:meth:`delay` through an :class:`~sdk.client.AsyncClient`."""
        return await self.apply_async()

    async def apply_async(self, client: AsyncClient | None = None) -> AsyncGroupHandle:
        """:meth:`apply` through an :class:`~sdk.client.AsyncClient`."""
        client = client or self.members[0].fn.async_client()
        name, tasks = self._batch()
        created = await client.enqueue_batch_receipts(self.queue, tasks)
        handles = [AsyncTaskHandle(t, client) for t in created]
        count = len(self.members)
        return AsyncGroupHandle(name, handles[:count], handles[count:])

    def __repr__(self) -> str:
        text = f"group({', '.join(map(repr, self.members))}, name={self.name!r})"
        return text + "".join(f".then({d!r})" for d in self.dependents)


def group(*members: TaskSignature, name: str | None = None) -> Group:
    """Task runs (``my_task.s(...)``) to enqueue as one group of one queue; ``name`` names the
    group (default: a fresh ``group-<ULID>`` each time it is enqueued)."""
    return Group(members, name)


@dataclass(frozen=True)
class GroupHandle:
    """An enqueued group: its ``name``, its ``members``' handles and its ``dependents``'
    (from :meth:`Group.then`), in the order given."""

    name: str
    members: list[TaskHandle]
    dependents: list[TaskHandle]

    def results(self, timeout: float = 30.0) -> list[Any]:
        """The members' results, in order, once all have succeeded (``timeout`` seconds for all
        of them). Raises :class:`~sdk.errors.TaskFailed` for the first member that did not
        succeed, :class:`~sdk.errors.TaskTimeout` when one has not finished in time."""
        deadline = time.monotonic() + timeout
        return [member.result(max(deadline - time.monotonic(), 0.0)) for member in self.members]


@dataclass(frozen=True)
class AsyncGroupHandle:
    """An enqueued group, seen through an :class:`~sdk.client.AsyncClient`."""

    name: str
    members: list[AsyncTaskHandle]
    dependents: list[AsyncTaskHandle]

    async def results(self, timeout: float = 30.0) -> list[Any]:
        """Like :meth:`GroupHandle.results`; the members are waited for at once."""
        waits = [member.result(timeout) for member in self.members]
        results = await asyncio.gather(*waits, return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result
        return results
