"""What the queue gauges show, read from Redis in one round trip (a pipeline).

Metrics are collected on a scrape of ``/metrics`` or an OTLP export, not on a timer, and each
collection costs one pipeline whatever the number of queues: the registered queue names, Redis's
clock, and for each queue known from the reading before the size of every state index, its
``inflight`` hash and its endpoints' ``health`` (whose circuits are open). A queue registered
since shows from the next reading on (:class:`~gateway.telemetry.gauges.QueueGauges` reads
again at once when the names changed).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from redis.asyncio import Redis

from gateway.store import keys
from gateway.store.keys import QueueKeys
from sdk.wire import TaskState

GAUGE_STATES: tuple[TaskState, ...] = (
    TaskState.SCHEDULED,
    TaskState.WAITING,
    TaskState.QUEUED,
    TaskState.RUNNING,
    *keys.FINISHED_STATES,
)


@dataclass(frozen=True, slots=True)
class GaugeReading:
    queues: frozenset[str] = frozenset()  # every registered queue, as of this reading
    depth: dict[str, dict[TaskState, int]] = field(default_factory=dict)  # of the queues read
    in_flight: dict[str, dict[str, int]] = field(default_factory=dict)  # queue -> endpoint -> n
    circuit_open: dict[str, dict[str, bool]] = field(default_factory=dict)  # open or half open


def _index(k: QueueKeys, state: TaskState) -> str:
    by_state = {
        TaskState.SCHEDULED: k.scheduled,
        TaskState.WAITING: k.waiting,
        TaskState.QUEUED: k.ready,
        TaskState.RUNNING: k.running,
    }
    return by_state.get(state) or k.finished(state)


class GaugeStore:
    def __init__(self, redis: Redis) -> None:
        self._redis = redis

    async def read(self, queues: Sequence[str]) -> GaugeReading:
        """The registered queue names, and the depths and pushes in flight of ``queues``."""
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.smembers(keys.QUEUES)
            # Not pipe.time(): redis-py's cluster pipeline refuses it by name, yet sends TIME
            # given as a plain command (to one node; any node's clock will do).
            pipe.execute_command("TIME")
            for queue in queues:
                k = QueueKeys.of(queue)
                for state in GAUGE_STATES:
                    pipe.zcard(_index(k, state))
                pipe.hgetall(k.inflight)
                pipe.hgetall(k.health)
            replies: list[Any] = await pipe.execute()
        names = frozenset(cast(set[str], replies[0]))
        seconds, micros = replies[1]
        now_ms = int(seconds) * 1000 + int(micros) // 1000
        depth: dict[str, dict[TaskState, int]] = {}
        in_flight: dict[str, dict[str, int]] = {}
        circuit_open: dict[str, dict[str, bool]] = {}
        at = 2
        for queue in queues:
            sizes = replies[at : at + len(GAUGE_STATES)]
            flights = cast(dict[str, str], replies[at + len(GAUGE_STATES)])
            healths = cast(dict[str, str], replies[at + len(GAUGE_STATES) + 1])
            at += len(GAUGE_STATES) + 2
            if queue not in names:
                continue  # deleted since
            depth[queue] = dict(zip(GAUGE_STATES, (int(n) for n in sizes), strict=True))
            in_flight[queue] = {ep: max(0, int(n)) for ep, n in flights.items()}
            circuit_open[queue] = {
                **dict.fromkeys(flights, False),
                **{ep: _open(raw, now_ms) for ep, raw in healths.items()},
            }
        return GaugeReading(names, depth, in_flight, circuit_open)


def _open(health_json: str, now_ms: int) -> bool:
    """Whether an endpoint's circuit is open, or half open (a probe is out): see health.lua."""
    health = json.loads(health_json)
    return bool(health.get("probe")) or (health.get("open_until") or 0) > now_ms
