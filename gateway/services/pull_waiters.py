"""The long polls of this gateway waiting for work, in line: one wake-up per new task, oldest first.

Each pull endpoint of a queue has a line (:class:`_Line`) of the polls that lease for it here. A
wake-up (:meth:`PullWaiters.wake`: an enqueue here, or a ``jg:wake`` message from any gateway,
which says how many tasks became ready when it can) wakes as many idle polls, front first, as
the new tasks fill (each poll counts for its ``max_tasks``), or one when the number is not known;
every other poll sleeps on. So 200 polls waiting for 200 tasks make about 200 claims, not one per
poll per task.

What keeps a task from being stranded while a poll sleeps:

- A poll notes the line's count of *unserved* wake-ups (those that found too few idle polls to
  wake) before it claims, and after a claim that took nothing it goes to sleep only if that count
  has not moved: a wake-up that came while it claimed and found nobody idle to wake makes it claim
  again at once (:meth:`Turn.wait`). Noting, claiming and lining up happen in this order on one
  event loop, so no wake-up falls between "claimed nothing" and "waiting".
- A poll that took tasks while the claim says more may be ready (``settled`` false) hands a
  wake-up on to the front of the line, unless another poll of the line is awake and will claim
  after it (that one decides in turn). So a poll taking fewer tasks than a message announced, or
  another gateway's poll taking some, strands nothing.
- A poll woken that leaves without a claim's answer (its client gone, an error) hands its wake-up
  on.
- A poll that claimed nothing goes back to the front of the line: it keeps its turn.

Polls waiting for room (their endpoint or queue full, paused) or for a rate limit still re-check
on their own timers (:mod:`gateway.services.pulls`); those timers are the backstop, not the
mechanism. Across gateways each gateway hands out its own wake-ups: a task announced to two
gateways wakes one poll on each, and one of the two claims nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Iterator


class _Poll:
    """One long poll's place in its line."""

    __slots__ = ("active", "max_tasks", "owes", "queued", "woken")

    def __init__(self, max_tasks: int) -> None:
        self.max_tasks = max_tasks
        self.woken = asyncio.Event()
        self.active = False  # awake: it will claim (or is claiming) before it sleeps again
        self.owes = False  # awake, and no claim has answered since: others count on it
        self.queued = False  # asleep in the line's idle queue


class _Line:
    """The polls of one pull endpoint of one queue on this gateway."""

    __slots__ = ("active", "idle", "polls", "unserved")

    def __init__(self) -> None:
        self.idle: deque[_Poll] = deque()  # waiting for a wake-up, in turn order
        self.active = 0  # polls awake: claiming, or woken and about to claim
        self.polls = 0  # polls in the line, whatever they do
        self.unserved = 0  # wake-ups that found too few idle polls (only ever grows)

    def rise(self, poll: _Poll) -> None:
        """``poll`` is awake: it will claim before it sleeps again."""
        poll.active = poll.owes = True
        self.active += 1

    def rest(self, poll: _Poll) -> None:
        """``poll`` will not claim again before a wake-up, a timer, or ever."""
        if poll.active:
            poll.active = poll.owes = False
            self.active -= 1

    def wake(self, budget: int) -> None:
        """Wake idle polls, front first, until their ``max_tasks`` cover ``budget`` tasks; a
        budget left over is counted as unserved (the polls awake claim again for it)."""
        while budget > 0 and self.idle:
            poll = self.idle.popleft()
            poll.queued = False
            poll.woken.set()
            self.rise(poll)
            budget -= poll.max_tasks
        if budget > 0:
            self.unserved += 1


class Turn:
    """A poll's turn in its line, for one lease request (:meth:`PullWaiters.turn`)."""

    def __init__(self, line: _Line, poll: _Poll) -> None:
        self._line = line
        self._poll = poll
        self._mark = line.unserved
        self._claimed = False  # has claimed once: sleeps at the front of the line from then on
        line.polls += 1
        line.rise(poll)

    def claiming(self) -> None:
        """Call just before each claim."""
        self._mark = self._line.unserved

    def took(self, *, more: bool) -> None:
        """The claim leased tasks (the poll answers with them); ``more``: it did not say
        nothing else is ready (``settled``). Hands a wake-up on when no other poll of the line
        is awake to see the rest."""
        self._line.rest(self._poll)
        if more and not self._line.active:
            self._line.wake(1)

    async def wait(self, timeout: float) -> None:
        """After a claim that took nothing: sleep in line until woken or ``timeout`` seconds
        pass; at once when a wake-up found no idle poll while this one claimed."""
        line, poll = self._line, self._poll
        if line.unserved != self._mark:
            return
        poll.woken.clear()
        line.rest(poll)
        if self._claimed:
            line.idle.appendleft(poll)
        else:
            line.idle.append(poll)
        poll.queued = True
        self._claimed = True
        try:
            await asyncio.wait_for(poll.woken.wait(), timeout)
        except TimeoutError:
            pass
        finally:
            if poll.queued:  # not woken: timed out or cancelled
                line.idle.remove(poll)
                poll.queued = False
        if not poll.active:  # timed out: it claims again of its own accord
            line.rise(poll)

    async def sleep(self, timeout: float, until: asyncio.Event) -> None:
        """Sleep out of line (no wake-up is for it: a rate limit it must wait out) until
        ``until`` is set or ``timeout`` seconds pass."""
        self._line.rest(self._poll)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(until.wait(), timeout)
        self._line.rise(self._poll)

    def leave(self) -> None:
        """The poll answers (:meth:`PullWaiters.turn` calls this)."""
        line, poll = self._line, self._poll
        owed = poll.owes
        line.rest(poll)
        if poll.queued:
            line.idle.remove(poll)
            poll.queued = False
        line.polls -= 1
        if owed:  # awake, and gone without a claim's answer: the wake-up goes on
            line.wake(poll.max_tasks)


class PullWaiters:
    """The long polls waiting for work, by queue and pull endpoint: woken where the dispatcher
    is woken, as many as there is new work for (module docstring)."""

    def __init__(self) -> None:
        self._lines: dict[str, dict[str, _Line]] = {}
        self.closed = asyncio.Event()

    def waiting(self, queue: str) -> int:
        """Polls of ``queue`` asleep in line now."""
        return sum(len(line.idle) for line in self._lines.get(queue, {}).values())

    def wake(self, queue: str, ready: int | None = None) -> None:
        """``ready`` tasks of ``queue`` became ready (None: some may have, or room was freed):
        wake as many polls of each of its pull endpoints' lines."""
        for line in self._lines.get(queue, {}).values():
            line.wake(1 if ready is None else ready)

    def wake_all(self) -> None:
        """There may be work anywhere (wake-ups may have been lost): wake every poll."""
        for lines in self._lines.values():
            for line in lines.values():
                line.wake(sum(poll.max_tasks for poll in line.idle) or 1)

    def close(self) -> None:
        """End every wait now and any later one at once (the gateway is shutting down)."""
        self.closed.set()
        self.wake_all()

    @contextlib.contextmanager
    def turn(self, queue: str, endpoint_id: str, max_tasks: int) -> Iterator[Turn]:
        """A place at the back of the line of ``queue``'s pull endpoint ``endpoint_id``, for a
        poll leasing up to ``max_tasks`` tasks; awake at first (it claims before it waits)."""
        line = self._lines.setdefault(queue, {}).setdefault(endpoint_id, _Line())
        turn = Turn(line, _Poll(max_tasks))
        try:
            yield turn
        finally:
            turn.leave()
            if not line.polls:
                lines = self._lines[queue]
                del lines[endpoint_id]
                if not lines:
                    del self._lines[queue]
