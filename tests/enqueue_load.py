"""A producer and a readiness prober to run against a gateway while its Redis fails over,
shared by the Sentinel failover test (tests/integration/) and the cluster one (tests/cluster/).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx


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
                answer = await api.post(f"/v1/queues/{self.queue}/tasks", json={"name": "send"})
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
            status = (await api.get("/readyz")).status_code
            if not self.seen or self.seen[-1] != status:
                self.seen.append(status)
            await asyncio.sleep(0.05)

    def recovered(self) -> bool:
        """Readiness went 503, then 200 again."""
        return self.seen[-2:] == [503, 200]
