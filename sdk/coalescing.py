"""Coalescing: concurrent single enqueues of one client sent as batch requests.

Calls of ``enqueue`` (and so of ``.delay()`` / ``.apply()``) that one client receives close
together for the same queue share one ``POST /v1/queues/{queue}/tasks/batch``; each caller
still gets its own task, or its own error. The gateway stores a batch in call order, with the
same dedup and singleton rules as a series of single enqueues (a later member with the dedup
key of an earlier one gets the earlier task back, ``deduplicated``).

A batch is all-or-nothing at the gateway, so a member must not fail because of a neighbour:
when a batch is refused for reasons that may concern some members only (422 naming
``tasks.<i>...``, 409, 413, other 4xx but the request-wide 401/403/404/429), nothing was
stored; the members it names are sent again alone, the others again as batches between them,
in call order (:func:`coalesced`), and each caller gets what its own single enqueue answered.
A refusal that concerns the request as a whole (unknown queue, auth, rate limit, 5xx, a network
failure) is every member's error, as it would have been for each single enqueue.

A lone call goes out as a plain single enqueue. How long a call may wait for neighbours is the
client's ``linger``: :class:`AsyncCoalescer` with 0 (the default) sends what arrived in the
same event-loop iteration, so a lone call waits for nothing; :class:`BlockingCoalescer` (the
blocking client's threads) holds the first call of a batch up to ``linger`` seconds, or until
``max_batch`` calls have joined.
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Awaitable, Callable, Generator
from typing import Any

from sdk import api
from sdk.errors import ApiError
from sdk.telemetry.tracing import current_headers
from sdk.wire import HEADER_TRACEPARENT, HEADER_TRACESTATE, Task, TaskCreate

__all__ = ["AsyncCoalescer", "BlockingCoalescer", "coalesced", "traced"]

Outcome = Task | BaseException
"""A member's answer: its task, or the error its caller raises."""

Plan = Generator[api.Call[Any], Any, list[Outcome]]
"""Yields calls; is sent each call's answer, or the exception it raised."""

WHOLE_REQUEST = frozenset({401, 403, 404, 429})
"""Refusals that concern the request, not its members: each member would get them alone."""

_MEMBER = re.compile(r"tasks\.(\d+)(\.|$)")


def coalesced(queue: str, tasks: list[TaskCreate]) -> Plan:
    """Enqueue ``tasks`` (in call order) in as few requests as their refusals allow; one
    outcome per task, as its own single enqueue would have had."""
    if len(tasks) == 1:
        answer = yield api.enqueue(queue, tasks[0])
        return [answer]
    answer = yield api.enqueue_batch(queue, tasks)
    if not isinstance(answer, BaseException):
        created: list[Task] = answer
        return list(created)
    if not _concerns_members(answer):
        return [answer] * len(tasks)
    named = _members(answer, len(tasks))
    outcomes: list[Outcome] = []
    for run in _runs(len(tasks), named):
        outcomes += yield from coalesced(queue, [tasks[i] for i in run])
    return outcomes


def _concerns_members(error: BaseException) -> bool:
    return isinstance(error, ApiError) and error.status < 500 and error.status not in WHOLE_REQUEST


def _members(error: BaseException, count: int) -> set[int]:
    """The members a refusal names by its field paths (``tasks.<i>...``)."""
    named: set[int] = set()
    problem = error.problem if isinstance(error, ApiError) else None
    for field_error in (problem.errors if problem else None) or ():
        found = _MEMBER.match(field_error.field)
        if found and int(found.group(1)) < count:
            named.add(int(found.group(1)))
    return named


def _runs(count: int, named: set[int]) -> list[list[int]]:
    """Indices in order, cut into runs: each named member alone, the members between named
    ones together. With none named, every member alone."""
    if not named:
        return [[i] for i in range(count)]
    runs: list[list[int]] = []
    run: list[int] = []
    for i in range(count):
        if i in named:
            if run:
                runs.append(run)
                run = []
            runs.append([i])
        else:
            run.append(i)
    if run:
        runs.append(run)
    return runs


def traced(task: TaskCreate) -> TaskCreate:
    """``task`` carrying the caller's trace context in its own fields (a batch request's
    headers cannot carry one per member); unchanged without a current span or with its own."""
    if task.traceparent is not None:
        return task
    headers = current_headers()
    parent = headers.get(HEADER_TRACEPARENT)
    if parent is None:
        return task
    return task.model_copy(
        update={"traceparent": parent, "tracestate": headers.get(HEADER_TRACESTATE)}
    )


def _result(outcome: Outcome) -> Task:
    if isinstance(outcome, BaseException):
        raise outcome
    return outcome


class AsyncCoalescer:
    """Gathers one :class:`~sdk.client.AsyncClient`'s concurrent enqueues per queue."""

    def __init__(
        self, send: Callable[[api.Call[Any]], Awaitable[Any]], linger: float, max_batch: int
    ) -> None:
        self._send = send
        self._linger = linger
        self._max_batch = max_batch
        self._pending: dict[str, _AsyncBatch] = {}
        self._sending: set[asyncio.Task[None]] = set()

    async def enqueue(self, queue: str, task: TaskCreate) -> Task:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Outcome] = loop.create_future()
        batch = self._pending.get(queue)
        if batch is None:
            batch = self._pending[queue] = _AsyncBatch()
            if self._linger > 0:
                batch.timer = loop.call_later(self._linger, self._flush, queue, batch)
            else:
                batch.timer = loop.call_soon(self._flush, queue, batch)
        batch.members.append((traced(task), future))
        if len(batch.members) >= self._max_batch:
            self._flush(queue, batch)
        return _result(await future)

    def _flush(self, queue: str, batch: _AsyncBatch) -> None:
        if batch.timer is not None:
            batch.timer.cancel()
        if self._pending.get(queue) is batch:
            del self._pending[queue]
        members = [(t, f) for t, f in batch.members if not f.done()]  # callers gone: unsent
        if members:
            sending = asyncio.get_running_loop().create_task(self._deliver(queue, members))
            self._sending.add(sending)
            sending.add_done_callback(self._sending.discard)

    async def _deliver(
        self, queue: str, members: list[tuple[TaskCreate, asyncio.Future[Outcome]]]
    ) -> None:
        futures = [f for _, f in members]
        try:
            outcomes = await self._drive(coalesced(queue, [t for t, _ in members]))
        except BaseException:
            for future in futures:
                future.cancel()
            raise
        for future, outcome in zip(futures, outcomes, strict=True):
            if not future.done():
                future.set_result(outcome)

    async def _drive(self, plan: Plan) -> list[Outcome]:
        try:
            call = next(plan)
            while True:
                try:
                    answer = await self._send(call)
                except Exception as e:  # the members' error, given to them one by one
                    answer = e
                call = plan.send(answer)
        except StopIteration as done:
            outcomes: list[Outcome] = done.value
            return outcomes

    async def aclose(self) -> None:
        """Let the batches on their way finish (their callers are waiting for them)."""
        while self._pending or self._sending:
            for queue, batch in list(self._pending.items()):
                self._flush(queue, batch)
            await asyncio.gather(*self._sending, return_exceptions=True)


class _AsyncBatch:
    __slots__ = ("members", "timer")

    def __init__(self) -> None:
        self.members: list[tuple[TaskCreate, asyncio.Future[Outcome]]] = []
        self.timer: asyncio.Handle | None = None


class BlockingCoalescer:
    """Gathers a :class:`~sdk.client.Client`'s enqueues from several threads per queue: the
    first call of a batch waits up to ``linger`` seconds (less when ``max_batch`` join) and
    sends it; the others wait for their outcome."""

    def __init__(self, send: Callable[[api.Call[Any]], Any], linger: float, max_batch: int) -> None:
        self._send = send
        self._linger = linger
        self._max_batch = max_batch
        self._lock = threading.Lock()
        self._pending: dict[str, _BlockingBatch] = {}

    def enqueue(self, queue: str, task: TaskCreate) -> Task:
        task = traced(task)
        with self._lock:
            batch = self._pending.get(queue)
            leader = batch is None
            if batch is None:
                batch = self._pending[queue] = _BlockingBatch()
            index = len(batch.tasks)
            batch.tasks.append(task)
            if len(batch.tasks) >= self._max_batch:
                del self._pending[queue]
                batch.full.set()
        if not leader:
            batch.done.wait()
            return _result(batch.outcomes[index])
        batch.full.wait(self._linger)
        with self._lock:
            if self._pending.get(queue) is batch:
                del self._pending[queue]
        try:
            batch.outcomes = self._drive(coalesced(queue, batch.tasks))
        except BaseException as e:  # interrupted: the others must not wait for ever
            batch.outcomes = [e] * len(batch.tasks)
            raise
        finally:
            batch.done.set()
        return _result(batch.outcomes[index])

    def _drive(self, plan: Plan) -> list[Outcome]:
        try:
            call = next(plan)
            while True:
                try:
                    answer = self._send(call)
                except Exception as e:
                    answer = e
                call = plan.send(answer)
        except StopIteration as done:
            outcomes: list[Outcome] = done.value
            return outcomes


class _BlockingBatch:
    __slots__ = ("done", "full", "outcomes", "tasks")

    def __init__(self) -> None:
        self.tasks: list[TaskCreate] = []
        self.outcomes: list[Outcome] = []
        self.full = threading.Event()
        self.done = threading.Event()
