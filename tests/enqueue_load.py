"""A producer and a readiness prober to run against a gateway while its Redis fails over,
shared by the Sentinel failover test (tests/integration/) and the cluster one (tests/cluster/).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import httpx

from tests.support import until

# How long the loops below wait for one answer. The gateway promises which answers it gives
# through a failover (201 or 503), not how fast: one request may ride redis-py's retries while
# the slot has no primary, on a machine where other work keeps both cores busy. So a client
# that gives up is not an answer; this is a hang guard.
PATIENCE = 30.0


@dataclass
class Enqueues:
    """What a loop of single enqueues into ``queue`` got: the ids acknowledged (201), the 503s,
    and every other answer (another status, or no answer at all), which a gateway whose Redis
    fails over must never give."""

    queue: str
    acknowledged: list[str] = field(default_factory=list)
    acknowledged_at: list[float] = field(default_factory=list)  # time.monotonic()
    refused: Counter[str] = field(default_factory=Counter)
    unexpected: list[str] = field(default_factory=list)

    async def run(self, api: httpx.AsyncClient, until_done: Callable[[], bool]) -> None:
        while not until_done():
            try:
                answer = await api.post(
                    f"/v1/queues/{self.queue}/tasks", json={"name": "send"}, timeout=PATIENCE
                )
            except httpx.TransportError as e:
                self.unexpected.append(repr(e))
                continue
            if answer.status_code == 201:
                self.acknowledged.append(answer.json()["id"])
                self.acknowledged_at.append(time.monotonic())
            elif answer.status_code == 503:
                self.refused[str(answer.status_code)] += 1
                await asyncio.sleep(0.02)  # as a client honouring Retry-After would, briefly
            else:
                self.unexpected.append(f"{answer.status_code} {answer.text}")

    def longest_gap(self) -> float:
        """The longest time in seconds between two acknowledged enqueues."""
        return max(b - a for a, b in itertools.pairwise(self.acknowledged_at))


@dataclass
class Probes:
    """Every /readyz status seen, in order, without repeats."""

    seen: list[int] = field(default_factory=list)

    async def run(self, api: httpx.AsyncClient, until_done: Callable[[], bool]) -> None:
        while not until_done():
            status = (await api.get("/readyz", timeout=PATIENCE)).status_code
            if not self.seen or self.seen[-1] != status:
                self.seen.append(status)
            await asyncio.sleep(0.05)

    def recovered(self) -> bool:
        """Readiness went 503, then 200 again."""
        return self.seen[-2:] == [503, 200]


async def through_failover(
    api: httpx.AsyncClient,
    queue: str,
    fail_over: Callable[[], Awaitable[None]],
    *,
    after: int,
    within: float,
    replace: Callable[[], Awaitable[None]] | None = None,
) -> tuple[Enqueues, Probes]:
    """Enqueue into ``queue`` without pause and probe readiness; once 20 enqueues are
    acknowledged, ``fail_over()`` (kill the primary, wait for its replacement); then go on
    until ``after`` more are acknowledged (within ``within`` seconds) and readiness has gone
    503, then 200 again (within 10 more).

    With ``replace``, ``fail_over()`` only kills the primary, and its replacement waits until
    the gateway has refused an enqueue (503) and readiness has answered 503; then ``replace()``
    lets the replica be promoted and waits for it. A replacement that is not held can fall
    wholly inside one command's retries (redis-py's cluster client re-reads the slot map and
    retries a failed command for a second or two, so an enqueue or a readiness check that
    starts while the slot has no primary can end after the promotion, successfully), and then
    the gateway never says 503 at all: holding it is what makes those answers observable."""
    enqueues, probes = Enqueues(queue), Probes()
    failed_over = asyncio.Event()
    before: list[int] = []

    def done() -> bool:
        return failed_over.is_set() and len(enqueues.acknowledged) >= before[0] + after

    loop = asyncio.create_task(enqueues.run(api, done))
    probing = asyncio.create_task(probes.run(api, probes.recovered))
    try:
        await until(lambda: len(enqueues.acknowledged) >= 20, what="enqueues before")
        await fail_over()
        if replace is not None:
            try:
                await until(lambda: enqueues.refused and 503 in probes.seen, timeout=30)
            except AssertionError:
                raise AssertionError(
                    f"no primary, yet enqueues refused {dict(enqueues.refused)}, "
                    f"readiness {probes.seen}"
                ) from None
            await replace()
        before.append(len(enqueues.acknowledged))
        failed_over.set()
        await asyncio.wait_for(loop, within)  # enqueues succeed again
        try:
            await asyncio.wait_for(probing, 10)  # readiness went 503, then 200 again
        except TimeoutError:
            raise AssertionError(f"readiness did not go 503, then 200: saw {probes.seen}") from None
    finally:
        loop.cancel()
        probing.cancel()
        await asyncio.gather(loop, probing, return_exceptions=True)
    return enqueues, probes


def report(
    label: str, enqueues: Enqueues, lost: list[str], record_property: Callable[[str, object], None]
) -> None:
    """Record what a failover cost the producer and what it lost (shown by pytest -rA or -s,
    and in the JUnit report's properties)."""
    print(
        f"{label}: acknowledged {len(enqueues.acknowledged)}, lost {len(lost)}, "
        f"refused {dict(enqueues.refused)}, "
        f"longest time without an acknowledged enqueue {enqueues.longest_gap():.1f}s"
    )
    record_property("acknowledged", len(enqueues.acknowledged))
    record_property("lost", len(lost))
