"""The dispatcher: one loop per queue that claims ready tasks and pushes them.

A loop sleeps until woken (an enqueue here or, over pub/sub, on another gateway; a finished
attempt freeing room; a policy or endpoint change) and then claims until the claim script says
there is nothing it may take: either by taking nothing, or by saying that what it took was all
it could (``settled``), which saves the round trip that would only hear so. It never spins. A
queue with no ready task waits on its event alone, so idle queues cost nothing however many
there are; a wake-up lost while the pub/sub connection was broken is made up by
:meth:`Dispatcher.wake_all` once it is back. A queue whose ready tasks cannot go now (paused,
full, no endpoint with room) also re-checks on a slow safety tick, for changes made through
another gateway.

A loop whose last claim found nothing left to take (the queue empty, or all that could go
taken) is *idle*, and then an enqueue through this gateway claims for it
(:meth:`Dispatcher.offer`, :meth:`Dispatcher.take`): the claim script rides in the enqueue's
own round trip, right after the enqueue script, and what it leased is pushed at once, without
the wake-up and the claim's round trip of a cycle (one such claim per queue at a time: a burst
of enqueues wakes the loop instead). The loop is woken only when that claim leaves something
to do.

Several gateways may run dispatchers on one Redis: the claim script is the only way a task
becomes running, so each attempt is pushed once.

What a claim leased is pushed, and each answer recorded, by the dispatcher's
:class:`~gateway.dispatch.delivery.Deliverer`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import secrets
from collections.abc import Callable

from gateway.caches.directory import Directory
from gateway.core.backoff import loop_retry_delay
from gateway.core.errors import Unavailable
from gateway.dispatch.batching import Coalescer
from gateway.dispatch.delivery import Deliverer
from gateway.dispatch.pusher import Pusher
from gateway.store.clock import Clock
from gateway.store.failures import as_gateway_error
from gateway.store.records import Lease
from gateway.store.tasks import (
    Claim,
    ClaimOrder,
    ClaimStatus,
    Finish,
    Finished,
    TaskStore,
)
from gateway.telemetry.metrics import Metrics

log = logging.getLogger(__name__)

IDLE_TICK = 5.0
# Seconds after a finish left the room it freed to the other gateways that this one claims it
# itself, if no wake-up came meanwhile (another gateway that heard may be stopping, or stuck).
LEFT_TO_OTHERS = 0.1


class Dispatcher:
    def __init__(
        self,
        tasks: TaskStore,
        directory: Directory,
        pusher: Pusher,
        clock: Clock,
        *,
        batch: int = 64,
        rng: random.Random | None = None,
        on_finished: Callable[[str, Finished], None] = lambda q, f: None,
        metrics: Metrics | None = None,
    ) -> None:
        self._metrics = metrics or Metrics()
        self._tasks = tasks
        self._directory = directory
        self._pusher = pusher
        self._clock = clock
        self._batch = batch
        self._rng = rng or random.Random()
        self._on_finished = on_finished
        self._events: dict[str, tuple[asyncio.Event, asyncio.Event]] = {}
        self._loops: dict[str, asyncio.Task[None]] = {}
        # Queues whose loop's last claim found nothing it could take: no ready task, or none
        # left that an endpoint with room can take (it may be claiming again, woken).
        self._idle: set[str] = set()
        self._carried: set[str] = set()  # queues with an enqueue's or finish's claim under way
        # Queues whose last finish here said that ready tasks wait, and no other gateway heard.
        self._alone: set[str] = set()
        # Wake-ups per queue so far, and the queues whose freed room was left to other gateways
        # with a check due (:meth:`_leave`).
        self._wakes: dict[str, int] = {}
        self._left: dict[str, asyncio.TimerHandle] = {}
        self._pushes: set[asyncio.Task[None]] = set()
        self._finishes = Coalescer[Finish, Finished](self._finish_many)
        self._deliverer = Deliverer(
            tasks, directory, pusher, clock, self._rng, self._finishes, on_finished
        )
        self._failing: dict[str, int] = {}  # queue → claims failed in a row
        self._unreachable: set[str] = set()  # queues whose last claim found Redis unavailable
        self._stopping = False

    # --- loops ----------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        """True until :meth:`stop`: the dispatcher claims and pushes."""
        return not self._stopping

    @property
    def stalled(self) -> bool:
        """True while a queue's last claim failed because Redis did not answer: its ready
        tasks may be waiting. (A claim that fails for one queue's own reason does not count:
        one broken queue must not take every gateway out of service.)"""
        return bool(self._unreachable)

    def wake(self, queue: str) -> None:
        """Tell the queue's loop there may be work (new tasks, or room freed)."""
        self._signal(queue, change=False)

    def wake_all(self) -> None:
        """Tell every queue's loop there may be work (wake-ups may have been lost)."""
        for queue in list(self._loops):
            self.wake(queue)

    def offer(self, queue: str) -> ClaimOrder | None:
        """The claim an enqueue into ``queue`` may carry for this dispatcher: one when the
        queue's loop is idle (a busy loop claims the new tasks with the rest) and no other
        enqueue's claim is under way (a burst of enqueues wakes the loop, which claims for all
        of them at once, rather than each carrying a claim), else None. The enqueue then hands
        its answer to :meth:`take`."""
        if queue not in self._idle or queue in self._carried or self._stopping:
            return None
        self._carried.add(queue)
        return ClaimOrder(
            self._batch,
            secrets.token_hex(16),
            self._clock.now_ms,
            lambda claim: self.take(queue, claim),
        )

    def take(self, queue: str, claim: Claim | None) -> None:
        """Push what an enqueue or a finish claimed for this dispatcher, and wake the queue's
        loop when that claim left it something to do. None: the claim's answer was lost."""
        self._carried.discard(queue)
        if claim is not None:
            self._push_claimed(queue, claim)
            status = claim.status
            if (status is ClaimStatus.OK and claim.settled) or status is ClaimStatus.EMPTY:
                return  # all that could go went (or another gateway took it): still idle
            # Not idle until the loop's next claim says so: the next enqueues wake the loop
            # rather than each carry a claim that would hear the same.
            self._idle.discard(queue)
            if status in (ClaimStatus.FULL, ClaimStatus.PAUSED) or (
                status is ClaimStatus.NOENDPOINT and claim.retry_at_ms is None
            ):
                return  # held until an attempt ends or a change, which wake the loop anyway
        self.wake(queue)

    def changed(self, queue: str) -> None:
        """Tell the queue's loop its policy or endpoints changed (it may be unpaused)."""
        self._signal(queue, change=True)

    def _signal(self, queue: str, *, change: bool) -> None:
        if self._stopping:
            return
        work, changes = self._events.setdefault(queue, (asyncio.Event(), asyncio.Event()))
        self._wakes[queue] = self._wakes.get(queue, 0) + 1
        work.set()
        if change:
            changes.set()
        if queue not in self._loops:
            self._loops[queue] = asyncio.create_task(self._run(queue), name=f"dispatch:{queue}")

    async def _run(self, queue: str) -> None:
        work, changes = self._events[queue]
        try:
            while not self._stopping:
                work.clear()
                changes.clear()
                try:
                    claim = await self.claim(queue)
                except asyncio.CancelledError:
                    raise
                except Exception as e:
                    # Redis did not answer: try again soon (a Redis back is used within the
                    # cap), or at once when woken (the pub/sub connection back wakes all).
                    failures = self._failing[queue] = self._failing.get(queue, 0) + 1
                    if isinstance(as_gateway_error(e), Unavailable):
                        self._unreachable.add(queue)
                    if failures == 1:
                        log.exception("claiming from queue %s failed; retrying", queue)
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(work.wait(), loop_retry_delay(0, failures))
                    continue
                self._unreachable.discard(queue)
                if self._failing.pop(queue, 0):
                    log.warning("claiming from queue %s works again", queue)
                status = claim.status
                if status is ClaimStatus.EMPTY or (status is ClaimStatus.OK and claim.settled):
                    self._idle.add(queue)
                else:
                    self._idle.discard(queue)
                if status is ClaimStatus.NOQUEUE:
                    return
                if status is ClaimStatus.OK and not claim.settled:
                    continue
                if status is ClaimStatus.OK:
                    # All that can go now went: wait for a change rather than claim again to
                    # hear FULL (a wake-up since this claim began is not lost: the event is
                    # cleared before the claim). The slow tick covers a lost message.
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(work.wait(), IDLE_TICK)
                    continue
                # Nothing ready: only a wake-up can change that. Otherwise re-check slowly.
                timeout = None if status is ClaimStatus.EMPTY else IDLE_TICK
                if claim.retry_at_ms is not None:
                    retry_in = max(0, claim.retry_at_ms - self._clock.now_ms()) / 1000
                    timeout = retry_in if timeout is None else min(timeout, retry_in)
                if status is ClaimStatus.RATE and not claim.held:
                    # The bucket refills at its own pace: new work cannot make it sooner. (Held
                    # by per-name or per-key buckets, a new task of another key can.)
                    await asyncio.sleep(IDLE_TICK if timeout is None else timeout)
                    continue
                # A paused queue ignores new work until its policy changes.
                awaited = changes if status is ClaimStatus.PAUSED else work
                if timeout is None:
                    await awaited.wait()
                else:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(awaited.wait(), timeout)
        finally:
            self._idle.discard(queue)
            self._failing.pop(queue, None)
            self._unreachable.discard(queue)
            self._loops.pop(queue, None)

    async def step(self, queue: str) -> ClaimStatus:
        """Claim one batch and start pushing it; returns the claim's status."""
        return (await self.claim(queue)).status

    async def claim(self, queue: str) -> Claim:
        """Claim one batch and start pushing it."""
        claim = await self._tasks.claim(
            queue, self._batch, secrets.token_hex(16), self._clock.now_ms()
        )
        self._push_claimed(queue, claim)
        return claim

    def _push_claimed(self, queue: str, claim: Claim) -> None:
        """Start a push task per endpoint for the claim's leases."""
        if claim.leases:
            self._metrics.selected(claim.leases)
        by_endpoint: dict[str, list[Lease]] = {}
        for lease in claim.leases:
            by_endpoint.setdefault(lease.endpoint_id, []).append(lease)
        for endpoint_id, leases in by_endpoint.items():
            push = asyncio.create_task(
                self._deliverer.deliver(queue, endpoint_id, leases),
                name=f"push:{queue}:{endpoint_id}",
            )
            self._pushes.add(push)
            push.add_done_callback(self._pushes.discard)

    async def stop(self, grace: float = 10.0) -> None:
        """Stop claiming; let pushes in flight finish for up to ``grace`` seconds. A push cut
        off is not lost: its lease expires and the recoverer retries it."""
        self._stopping = True
        for check in self._left.values():
            check.cancel()
        self._left.clear()
        # Wake every loop as well as cancelling it: on Python 3.11, a cancellation that lands
        # as wait_for's event fires is lost, and the loop, re-checking ``_stopping`` after its
        # wait, must then find its way out by itself.
        for work, changes in self._events.values():
            work.set()
            changes.set()
        for loop in list(self._loops.values()):
            loop.cancel()
        await asyncio.gather(*self._loops.values(), return_exceptions=True)
        if self._pushes:
            _, cut = await asyncio.wait(set(self._pushes), timeout=grace)
            for push in cut:
                push.cancel()
            await asyncio.gather(*cut, return_exceptions=True)
        self._deliverer.close()

    async def _finish_many(self, queue: str, finishes: list[Finish]) -> list[Finished]:
        """Write ends of attempts. The loop is woken only when the finish says that ready tasks
        wait, so a lone task's end costs no claim that would find the queue empty.

        When the last finish said that tasks wait and that no other gateway heard so (this one
        is the queue's only dispatcher), this one carries the claim of the room it frees (an
        idle loop's: :meth:`offer`), saving the loop's wake-up and the claim's round trip.
        When other gateways heard, the room is left to their loops (:meth:`_leave`): a claim
        riding behind the finish would always come first, and the gateway that held the room
        would keep all of it."""
        now_ms = self._clock.now_ms()
        order = self.offer(queue) if queue in self._alone else None
        ended = await self._tasks.finish_batch(queue, finishes, now_ms, claim=order)
        self._metrics.finished(queue, finishes, ended.done, now_ms)
        if ended.ready and ended.alone:
            self._alone.add(queue)
        else:
            self._alone.discard(queue)
        if ended.ready and order is None:
            if ended.shared:
                self._leave(queue)
            else:
                self.wake(queue)
        return ended.done

    def _leave(self, queue: str) -> None:
        """Leave the room a finish freed to the other gateways that heard its wake message: their
        loops claim it, and this one's is not woken for it. Each gateway then claims the room the
        others free, which shares it evenly, and one claim per finish is made instead of one per
        gateway (all but the first finding no room: NOENDPOINT or FULL). Should no wake-up
        reach this queue's loop within ``LEFT_TO_OTHERS`` (a gateway that heard may be
        stopping, or stuck), it is woken then."""
        if queue in self._left or self._stopping:
            return
        self._left[queue] = asyncio.get_running_loop().call_later(
            LEFT_TO_OTHERS, self._left_over, queue, self._wakes.get(queue, 0)
        )

    def _left_over(self, queue: str, wakes: int) -> None:
        del self._left[queue]
        if self._wakes.get(queue, 0) == wakes:
            self.wake(queue)
