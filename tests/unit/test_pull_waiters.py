"""The line of waiting pull polls (gateway/services/pull_waiters.py), driven by hand: whom a
wake-up wakes, who keeps a turn, and how a wake-up that would be lost is not."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

from gateway.services.pull_waiters import PullWaiters, Turn


class Line:
    """Polls of queue ``q``'s endpoint ``ep`` on one :class:`PullWaiters`."""

    def __init__(self, stack: ExitStack) -> None:
        self.waiters = PullWaiters()
        self._stack = stack
        self.sleeping: dict[Turn, asyncio.Task[None]] = {}

    def join(self, max_tasks: int = 1) -> Turn:
        return self._stack.enter_context(self.waiters.turn("q", "ep", max_tasks))

    async def sleep(self, turn: Turn) -> None:
        """``turn`` claimed and took nothing: it waits (in a task of its own)."""
        self.sleeping[turn] = asyncio.create_task(turn.wait(60))
        await asyncio.sleep(0)

    async def idle(self, n: int, max_tasks: int = 1) -> list[Turn]:
        turns = [self.join(max_tasks) for _ in range(n)]
        for turn in turns:
            turn.claiming()
            await self.sleep(turn)
        return turns

    async def woken(self, turns: list[Turn]) -> list[bool]:
        """Which of ``turns`` are no longer asleep, once the woken ones have run."""
        for _ in range(5):  # the event, then wait_for's own task
            await asyncio.sleep(0)
        return [turn in self.sleeping and self.sleeping[turn].done() for turn in turns]


@contextmanager
def line() -> Iterator[Line]:
    with ExitStack() as stack:
        made = Line(stack)
        try:
            yield made
        finally:
            for task in made.sleeping.values():
                task.cancel()


async def test_a_wake_up_wakes_as_many_polls_as_there_are_tasks_oldest_first() -> None:
    with line() as polls:
        turns = await polls.idle(5)
        assert polls.waiters.waiting("q") == 5
        polls.waiters.wake("q", 2)
        assert await polls.woken(turns) == [True, True, False, False, False]
        polls.waiters.wake("q")  # how many is not known: one
        assert await polls.woken(turns) == [True, True, True, False, False]
        polls.waiters.wake("other", 5)
        assert await polls.woken(turns) == [True, True, True, False, False]
        assert polls.waiters.waiting("q") == 2


async def test_a_poll_counts_for_as_many_tasks_as_it_may_take() -> None:
    with line() as polls:
        turns = await polls.idle(4, max_tasks=4)
        polls.waiters.wake("q", 9)
        assert await polls.woken(turns) == [True, True, True, False]


async def test_a_poll_that_claimed_nothing_keeps_its_turn() -> None:
    with line() as polls:
        first, second = await polls.idle(2)
        polls.waiters.wake("q", 1)
        assert await polls.woken([first, second]) == [True, False]
        first.claiming()  # ... and takes nothing: back in line, at the front
        await polls.sleep(first)
        late = await polls.idle(1)
        polls.waiters.wake("q", 1)
        assert await polls.woken([first, second, *late]) == [True, False, False]


async def test_a_wake_up_while_the_only_poll_claims_makes_it_claim_again() -> None:
    with line() as polls:
        turn = polls.join()
        turn.claiming()
        polls.waiters.wake("q", 1)  # a task enqueued after the claim looked: nobody idle
        await polls.sleep(turn)
        assert await polls.woken([turn]) == [True]  # not asleep: it claims again
        assert polls.waiters.waiting("q") == 0


async def test_a_wake_up_that_woke_another_poll_lets_the_claiming_one_sleep() -> None:
    with line() as polls:
        (idle,) = await polls.idle(1)
        claiming = polls.join()
        claiming.claiming()
        polls.waiters.wake("q", 1)
        await polls.sleep(claiming)
        assert await polls.woken([idle, claiming]) == [True, False]


async def test_a_poll_that_took_tasks_while_more_are_ready_hands_a_wake_up_on() -> None:
    with line() as polls:
        turns = await polls.idle(4)
        polls.waiters.wake("q", 2)
        assert await polls.woken(turns) == [True, True, False, False]
        turns[0].took(more=True)  # the second poll is awake and will see the rest
        assert await polls.woken(turns) == [True, True, False, False]
        turns[1].took(more=True)
        assert await polls.woken(turns) == [True, True, True, False]
        turns[2].took(more=False)  # nothing else is ready
        assert await polls.woken(turns) == [True, True, True, False]


async def test_a_woken_poll_that_leaves_without_claiming_hands_its_wake_up_on() -> None:
    with line() as polls, ExitStack() as gone:
        leaving = gone.enter_context(polls.waiters.turn("q", "ep", 1))
        leaving.claiming()
        polls.sleeping[leaving] = asyncio.create_task(leaving.wait(60))
        await asyncio.sleep(0)
        turns = await polls.idle(2)
        polls.waiters.wake("q", 1)
        assert await polls.woken([leaving, *turns]) == [True, False, False]
        gone.close()  # its client went away before it claimed
        assert await polls.woken(turns) == [True, False]


async def test_an_idle_poll_that_leaves_wakes_nobody_and_empties_the_line() -> None:
    with line() as polls, ExitStack() as gone:
        leaving = gone.enter_context(polls.waiters.turn("q", "ep", 1))
        leaving.claiming()
        task = asyncio.create_task(leaving.wait(60))
        await asyncio.sleep(0)
        (other,) = await polls.idle(1)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        gone.close()
        assert polls.waiters.waiting("q") == 1
        assert await polls.woken([other]) == [False]


async def test_close_wakes_every_poll() -> None:
    with line() as polls:
        turns = await polls.idle(3, max_tasks=2)
        polls.waiters.close()
        assert await polls.woken(turns) == [True, True, True]
        assert polls.waiters.closed.is_set()
