"""The lease watch: no push waits past its task's lease, heartbeats included.

One watch per dispatcher, under one timer (:class:`~gateway.dispatch.deadlines.Deadlines`):
at a push's deadline (its lease's end less a margin, :func:`lease_budget`) the current
expiries of its leases are read, and the push is cut if one ran out, or watched again until the
new end a heartbeat gave it."""

from __future__ import annotations

import asyncio

from gateway.dispatch.deadlines import Cut, Deadlines
from gateway.store.clock import Clock
from gateway.store.records import Lease
from gateway.store.tasks import TaskStore

LEASE_MARGIN = 0.5  # seconds before its lease ends that a push gives up, at most


def lease_budget(expires_ms: int, now_ms: int) -> float:
    """Seconds a push may still wait for its answer under a lease ending at ``expires_ms``: up
    to a margin (``LEASE_MARGIN``, at most a fifth of the time left) before, so that the
    timeout is recorded as the endpoint's failure before the recoverer finds the lease expired
    (which, unanswered, would count for nothing and be retried at once)."""
    left = (expires_ms - now_ms) / 1000
    return max(0.0, left - min(LEASE_MARGIN, left / 5))


class Watched(Cut):
    """A push under the lease watch: its task and its leases."""

    __slots__ = ("at_ms", "failed", "leases")

    def __init__(self, leases: list[Lease]) -> None:
        super().__init__()
        self.leases = leases
        self.at_ms = 0  # the lease end it is watched until
        self.failed: Exception | None = None  # reading the current expiries failed


class LeaseWatch:
    """The end of every push's lease, for one dispatcher, under one timer (:class:`Deadlines`).

    At a push's deadline (its lease's end less a margin: :func:`lease_budget`) the current
    expiries of its leases are read (a heartbeat may have extended them): if one ran out, the
    push's task is cancelled (:meth:`Cut.now`), otherwise the push is watched again until the
    new end. A failed read cuts the push too, with the error (:attr:`Watched.failed`)."""

    def __init__(self, tasks: TaskStore, clock: Clock) -> None:
        self._tasks = tasks
        self._clock = clock
        self._deadlines = Deadlines[Watched](self._check_soon)
        self._checks: set[asyncio.Task[None]] = set()

    def add(self, watched: Watched, at_ms: int) -> None:
        """Watch a push whose leases end at ``at_ms`` (the earliest of them); then
        :meth:`ended` once the push is over."""
        budget = lease_budget(at_ms, self._clock.now_ms())
        watched.at_ms = at_ms
        self._deadlines.add(budget, watched)

    def ended(self, watched: Watched) -> None:
        watched.ended = True
        self._deadlines.ended()

    def close(self) -> None:
        self._deadlines.close()
        for check in self._checks:
            check.cancel()

    def _check_soon(self, watched: Watched) -> None:
        check = asyncio.get_running_loop().create_task(self._check(watched))
        self._checks.add(check)
        check.add_done_callback(self._checks.discard)

    async def _check(self, watched: Watched) -> None:
        leases = watched.leases
        keys = [(lease.task_id, lease.token) for lease in leases]
        try:
            found = await self._tasks.lease_expiries(leases[0].queue, keys)
        except Exception as e:  # the push is cut, and ends with this error
            if not watched.ended:
                watched.failed = e
                watched.now()
            return
        if watched.ended:  # the push ended while this read ran
            return
        current = [at for at in found if at]
        if not current or min(current) <= watched.at_ms:
            watched.now()
        else:  # extended by a heartbeat: watched again until the new end
            self._deadlines.ended()  # the entry that came due
            self.add(watched, min(current))
