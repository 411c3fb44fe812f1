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

When calls wait, and for how long, is the client's ``linger``:

- ``0`` (the default): a call never waits for a neighbour to come. It is sent at once,
  alone, unless :data:`WINDOW` (one) enqueue request of the client for its queue is in flight;
  then it joins the queue's next batch, which is sent as soon as that request returns (or once
  ``max_batch`` calls have joined). A lone call costs what it did without coalescing; under
  load, calls share a request per round trip (Nagle's rule, or a database's group commit). A
  call that meets one in flight waits for it: up to one round trip more than going alone.
- ``linger > 0``: every call waits up to ``linger`` seconds for neighbours; the batch goes when
  the time is up or ``max_batch`` calls have joined, whatever is in flight.

A call may ask for the whole Task (``enqueue``) or for a :class:`~sdk.wire.TaskReceipt` only
(``enqueue_receipt``, what ``.delay()`` sends: ``Prefer: return=minimal``). A batch asks for
receipts unless one of its members wants a Task; then receipt callers get their Task's receipt.

:class:`AsyncCoalescer` serves an :class:`~sdk.client.AsyncClient` (one event loop),
:class:`BlockingCoalescer` a :class:`~sdk.client.Client` shared by threads.
"""

from __future__ import annotations

import asyncio
import contextvars
import re
import threading
from collections.abc import Awaitable, Callable, Generator
from typing import Any

from sdk import api
from sdk.errors import ApiError
from sdk.telemetry.tracing import current_headers
from sdk.wire import HEADER_TRACEPARENT, HEADER_TRACESTATE, Task, TaskCreate, TaskReceipt

__all__ = ["AsyncCoalescer", "BlockingCoalescer", "coalesced", "traced"]

Outcome = Task | TaskReceipt | BaseException
"""A member's answer: its task (or receipt), or the error its caller raises."""

Plan = Generator[api.Call[Any], Any, list[Outcome]]
"""Yields calls; is sent each call's answer, or the exception it raised."""

WINDOW = 1
"""Enqueue requests per queue a client keeps in flight before calls wait to share a batch
(with ``linger=0``). One sent the most tasks per second through one gateway, with 64 calls in
flight (2,182/s, against 1,325 with two and 1,259 with four: bench/RESULTS.md, "Producer
(issue 20)"): bigger batches cost the gateway less per task."""

WHOLE_REQUEST = frozenset({401, 403, 404, 429})
"""Refusals that concern the request, not its members: each member would get them alone."""

_MEMBER = re.compile(r"tasks\.(\d+)(\.|$)")


def _one(queue: str, task: TaskCreate, minimal: bool) -> api.Call[Any]:
    return api.enqueue_receipt(queue, task) if minimal else api.enqueue(queue, task)


def coalesced(queue: str, tasks: list[TaskCreate], minimal: bool = False) -> Plan:
    """Enqueue ``tasks`` (in call order) in as few requests as their refusals allow; one
    outcome per task, as its own single enqueue would have had (a receipt with ``minimal``)."""
    if len(tasks) == 1:
        answer = yield _one(queue, tasks[0], minimal)
        return [answer]
    batch = api.enqueue_batch_receipts if minimal else api.enqueue_batch
    answer = yield batch(queue, tasks)
    if not isinstance(answer, BaseException):
        created: list[Task] | list[TaskReceipt] = answer
        return list(created)
    if not _concerns_members(answer):
        return [answer] * len(tasks)
    named = _members(answer, len(tasks))
    outcomes: list[Outcome] = []
    for run in _runs(len(tasks), named):
        outcomes += yield from coalesced(queue, [tasks[i] for i in run], minimal)
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


def _task(outcome: Outcome) -> Task:
    if isinstance(outcome, BaseException):
        raise outcome
    assert isinstance(outcome, Task)  # a batch with a member that wants Tasks asks for Tasks
    return outcome


def _receipt(outcome: Outcome) -> TaskReceipt:
    if isinstance(outcome, BaseException):
        raise outcome
    return outcome if isinstance(outcome, TaskReceipt) else TaskReceipt.of(outcome)


class AsyncCoalescer:
    """Coalesces one :class:`~sdk.client.AsyncClient`'s concurrent enqueues per queue."""

    def __init__(
        self, send: Callable[[api.Call[Any]], Awaitable[Any]], linger: float, max_batch: int
    ) -> None:
        self._send = send
        self._linger = linger
        self._max_batch = max_batch
        self._in_flight: dict[str, int] = {}
        self._pending: dict[str, _AsyncBatch] = {}
        self._sending: set[asyncio.Task[None]] = set()

    async def enqueue(self, queue: str, task: TaskCreate) -> Task:
        return _task(await self._enqueue(queue, task, False))

    async def enqueue_receipt(self, queue: str, task: TaskCreate) -> TaskReceipt:
        return _receipt(await self._enqueue(queue, task, True))

    async def _enqueue(self, queue: str, task: TaskCreate, minimal: bool) -> Outcome:
        in_flight = self._in_flight.get(queue, 0)
        if not self._linger and in_flight < WINDOW and queue not in self._pending:
            self._in_flight[queue] = in_flight + 1
            try:
                created: Outcome = await self._send(_one(queue, task, minimal))  # alone, at once
                return created
            finally:
                self._returned(queue)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Outcome] = loop.create_future()
        batch = self._pending.get(queue)
        if batch is None:
            batch = self._pending[queue] = _AsyncBatch()
            if self._linger:
                batch.timer = loop.call_later(self._linger, self._flush, queue, batch)
        batch.members.append((traced(task), future))
        batch.full = batch.full or not minimal
        if len(batch.members) >= self._max_batch:
            self._flush(queue, batch)
        return await future

    def _returned(self, queue: str) -> None:
        """A request of ``queue`` came back: its slot goes to the waiting batch, if any."""
        self._in_flight[queue] -= 1
        batch = self._pending.get(queue)
        if batch is not None and not self._linger:
            self._flush(queue, batch)

    def _flush(self, queue: str, batch: _AsyncBatch) -> None:
        if batch.timer is not None:
            batch.timer.cancel()
        if self._pending.get(queue) is batch:
            del self._pending[queue]
        members = [(t, f) for t, f in batch.members if not f.done()]  # callers gone: unsent
        if members:
            self._in_flight[queue] = self._in_flight.get(queue, 0) + 1
            sending = asyncio.get_running_loop().create_task(
                self._deliver(queue, members, not batch.full), context=contextvars.Context()
            )  # no caller's span on the request: each member carries its own
            self._sending.add(sending)
            sending.add_done_callback(self._sending.discard)

    async def _deliver(
        self,
        queue: str,
        members: list[tuple[TaskCreate, asyncio.Future[Outcome]]],
        minimal: bool,
    ) -> None:
        futures = [f for _, f in members]
        try:
            outcomes = await self._drive(coalesced(queue, [t for t, _ in members], minimal))
        except BaseException:
            for future in futures:
                future.cancel()
            raise
        finally:
            self._returned(queue)
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
        """Send what waits and let the batches on their way finish: callers wait for them."""
        while self._pending or self._sending:
            for queue, batch in list(self._pending.items()):
                self._flush(queue, batch)
            await asyncio.gather(*self._sending, return_exceptions=True)


class _AsyncBatch:
    __slots__ = ("full", "members", "timer")

    def __init__(self) -> None:
        self.members: list[tuple[TaskCreate, asyncio.Future[Outcome]]] = []
        self.timer: asyncio.TimerHandle | None = None
        self.full = False  # a member wants the whole Task, not a receipt


class BlockingCoalescer:
    """Coalesces a :class:`~sdk.client.Client`'s enqueues from several threads per queue: the
    first call of a batch waits for its turn (the request in flight returned, or ``linger``
    passed, or the batch is full) and sends it; the others wait for their outcome."""

    def __init__(self, send: Callable[[api.Call[Any]], Any], linger: float, max_batch: int) -> None:
        self._send = send
        self._linger = linger
        self._max_batch = max_batch
        self._turn = threading.Condition()
        self._in_flight: dict[str, int] = {}
        self._pending: dict[str, _BlockingBatch] = {}

    def enqueue(self, queue: str, task: TaskCreate) -> Task:
        return _task(self._enqueue(queue, task, False))

    def enqueue_receipt(self, queue: str, task: TaskCreate) -> TaskReceipt:
        return _receipt(self._enqueue(queue, task, True))

    def _enqueue(self, queue: str, task: TaskCreate, minimal: bool) -> Outcome:
        with self._turn:
            in_flight = self._in_flight.get(queue, 0)
            if not self._linger and in_flight < WINDOW and queue not in self._pending:
                self._in_flight[queue] = in_flight + 1
                batch = None
            else:
                batch = self._pending.get(queue)
                leader = batch is None
                if batch is None:
                    batch = self._pending[queue] = _BlockingBatch()
                index = len(batch.tasks)
                batch.tasks.append(traced(task))
                batch.full = batch.full or not minimal
                if len(batch.tasks) >= self._max_batch:  # full: later calls start another
                    del self._pending[queue]
                    self._turn.notify_all()
        if batch is None:
            try:
                created: Outcome = self._send(_one(queue, task, minimal))  # alone, at once
                return created
            finally:
                self._returned(queue)
        if not leader:
            batch.done.wait()
            return batch.outcomes[index]
        with self._turn:
            self._turn.wait_for(
                lambda: (
                    len(batch.tasks) >= self._max_batch
                    or (not self._linger and self._in_flight.get(queue, 0) < WINDOW)
                ),
                timeout=self._linger or None,
            )
            if self._pending.get(queue) is batch:
                del self._pending[queue]
            self._in_flight[queue] = self._in_flight.get(queue, 0) + 1
        try:  # without this thread's span on the request: each member carries its own
            plan = coalesced(queue, batch.tasks, not batch.full)
            batch.outcomes = contextvars.Context().run(self._drive, plan)
        except BaseException:  # interrupted (KeyboardInterrupt): the others must not wait
            import httpx  # loaded already: the client that sends is built on it

            lost = httpx.NetworkError("the request carrying this enqueue was interrupted")
            batch.outcomes = [lost] * len(batch.tasks)
            raise
        finally:
            self._returned(queue)
            batch.done.set()
        return batch.outcomes[index]

    def _returned(self, queue: str) -> None:
        with self._turn:
            self._in_flight[queue] -= 1
            self._turn.notify_all()

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
        self.done = threading.Event()
        self.full = False  # a member wants the whole Task, not a receipt
