"""Runs that pass results on: :func:`chain` and :func:`chord`, each one batch request.

::

    @task("maths")
    def add(x: int, y: int) -> int: ...

    @task("maths")
    def total(values: list[int]) -> int: ...

    chain(add.s(1, 2), add.s(10), add.s(100)).delay().result()     # 113: ((1+2)+10)+100
    chord(group(add.s(1, 1), add.s(2, 2)), total.s()).delay().result()   # 6: total([2, 4])

As in Celery, each result goes in as the **first positional argument**: a link of a chain past
the first gets the previous link's result before its own arguments, and a chord's callback gets
the list of the group's results, in the group's order. ``add.s(10)`` is accepted for a
two-argument ``add`` because it fits once that result is in front; such a run cannot be
enqueued on its own (``TypeError``).

Both are enqueued in **one batch request** (all stored or none), each task with an id made
here, the later ones with ``depends_on`` the earlier and ``pass_results`` (the gateway puts the
results in the push body; see docs/protocol.md). A failure or cancel of one task fails every
task after it, with a reason naming it. A link given a ``dedup_key`` or ``singleton_key``
(``add.s(1, 2).set(dedup_key="k")``) that matches an earlier task *is* that task: the links
after it wait for it and get its result, and its handle is the earlier task's
(``deduplicated``). Every task must be of one queue (a batch is per queue);
a chord holds at most 100 members (``depends_on``'s limit). At most 1 MiB of results travels
to one task: a task whose results went past it fails with a reason saying so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sdk.client import AsyncClient, Client
from sdk.groups import Group, TaskSignature
from sdk.handles import AsyncTaskHandle, TaskHandle
from sdk.outcomes import Refusal
from sdk.wire import PushBody, TaskCreate

__all__ = ["AsyncChainHandle", "Chain", "ChainHandle", "Chord", "chain", "chord"]

MAX_CHORD = 100
"""The most members of a chord: its callback's ``depends_on`` holds one id per member."""


def _new_id() -> str:
    from ulid import ULID  # here: python-ulid reads its version from package metadata at import

    return str(ULID())


def _linked(signature: TaskSignature, after: list[str], results_as: str) -> TaskCreate:
    """``signature``'s enqueue request, run after ``after`` with their results passed."""
    if signature.options.get("depends_on"):
        raise ValueError(f"{signature!r}: a chain or chord sets the depends_on of its tasks")
    # Checked with a stand-in for the result, which the worker puts in front.
    body = signature.fn.create((None, *signature.args), signature.kwargs, **signature.options)
    payload = {"args": list(signature.args), "kwargs": dict(signature.kwargs)}
    payload["results_as"] = results_as
    return body.model_copy(
        update={
            "id": body.id or _new_id(),
            "payload": payload,
            "depends_on": after,
            "pass_results": True,
        }
    )


def _with_id(body: TaskCreate) -> TaskCreate:
    return body if body.id else body.model_copy(update={"id": _new_id()})


def _one_queue(signatures: Sequence[TaskSignature], what: str) -> str:
    for signature in signatures:
        if not isinstance(signature, TaskSignature):
            raise TypeError(f"a {what} takes task runs, my_task.s(...), not {signature!r}")
    queues = sorted({signature.queue for signature in signatures})
    if len(queues) > 1:
        raise ValueError(
            f"every task of a {what} must be of one queue (a batch request is per queue); "
            f"these are of {', '.join(map(repr, queues))}"
        )
    return queues[0]


class Chain:
    """Runs each started once the one before has succeeded, with its result: see the module
    docstring."""

    def __init__(self, links: Sequence[TaskSignature]) -> None:
        if not links:
            raise ValueError("a chain needs at least one task")
        self.queue = _one_queue(links, "chain")
        for link in links:
            keys = [k for k in ("debounce", "throttle") if link.options.get(k) is not None]
            if keys:  # a replaced or dropped enqueue stores no task: the next would wait on none
                raise ValueError(f"{link!r}: the tasks of a chain or chord take no {keys[0]}")
        self.links = tuple(links)

    def create(self) -> list[TaskCreate]:
        """The tasks of the batch request, in chain order."""
        first = _with_id(self.links[0].create())
        tasks = [first]
        for link in self.links[1:]:
            tasks.append(_linked(link, [str(tasks[-1].id)], "first"))
        return tasks

    def delay(self) -> ChainHandle:
        return self.apply()

    def apply(self, client: Client | None = None) -> ChainHandle:
        """Enqueue the chain through ``client`` (default: the first task's client)."""
        client = client or self.links[0].fn.client()
        created = client.enqueue_batch_receipts(self.queue, self.create())
        return ChainHandle([TaskHandle(t, client) for t in created])

    async def delay_async(self) -> AsyncChainHandle:
        return await self.apply_async()

    async def apply_async(self, client: AsyncClient | None = None) -> AsyncChainHandle:
        """:meth:`apply` through an :class:`~sdk.client.AsyncClient`."""
        client = client or self.links[0].fn.async_client()
        created = await client.enqueue_batch_receipts(self.queue, self.create())
        return AsyncChainHandle([AsyncTaskHandle(t, client) for t in created])

    def __repr__(self) -> str:
        return f"chain({', '.join(map(repr, self.links))})"


class Chord(Chain):
    """A group's members, then a callback that receives their results in order."""

    def __init__(self, members: Group, callback: TaskSignature) -> None:
        if not isinstance(members, Group):
            raise TypeError(f"a chord's first argument is a group(...), not {members!r}")
        if members.dependents:
            raise ValueError("a chord's group has no dependents of its own (.then)")
        if len(members.members) > MAX_CHORD:
            raise ValueError(f"a chord holds at most {MAX_CHORD} members")
        super().__init__([*members.members, callback])
        self.group = members

    def create(self) -> list[TaskCreate]:
        """The group's members (as :meth:`Group.create` makes them), then the callback."""
        name = self.group.name or f"group-{_new_id()}"
        tasks = [_with_id(body) for body in self.group.create(name)]
        return [*tasks, _linked(self.links[-1], [str(t.id) for t in tasks], "list")]

    def __repr__(self) -> str:
        return f"chord({self.group!r}, {self.links[-1]!r})"


def chain(*links: TaskSignature) -> Chain:
    """Task runs (``my_task.s(...)``) of one queue, each passing its result to the next as its
    first argument; enqueued in one batch request by ``.delay()``."""
    return Chain(links)


def chord(members: Group, callback: TaskSignature) -> Chord:
    """A group and a callback run once every member has succeeded, with the list of their
    results (in the group's order) as its first argument; one batch request."""
    return Chord(members, callback)


@dataclass(frozen=True)
class ChainHandle:
    """An enqueued chain or chord: the handle of each task, in order (a chord's callback last)."""

    tasks: list[TaskHandle]

    @property
    def last(self) -> TaskHandle:
        return self.tasks[-1]

    def result(self, timeout: float = 30.0) -> Any:
        """The last task's result: :meth:`TaskHandle.result` (raises
        :class:`~sdk.errors.TaskFailed` with the reason when the chain broke)."""
        return self.last.result(timeout)


@dataclass(frozen=True)
class AsyncChainHandle:
    """An enqueued chain or chord, seen through an :class:`~sdk.client.AsyncClient`."""

    tasks: list[AsyncTaskHandle]

    @property
    def last(self) -> AsyncTaskHandle:
        return self.tasks[-1]

    async def result(self, timeout: float = 30.0) -> Any:
        return await self.last.result(timeout)


def passed_argument(push: PushBody, results_as: str) -> Any:
    """The first argument a worker puts before a task's own, for ``results_as`` ('first' or
    'list'), from the push body's ``results``; a :class:`Refusal` (422: the task fails, not
    retried) when the results are missing or were left out for size."""
    if push.results is None:
        return Refusal(
            422, "No results passed", "the payload asks for results the push does not carry"
        )
    for passed in push.results:
        if passed.truncated:
            return Refusal(
                422,
                "Results too large",
                f"the result of task {passed.id} was left out: the results passed to one task "
                "are capped at 1 MiB in all",
            )
    values = [passed.result for passed in push.results]
    return values if results_as == "list" else values[0]
