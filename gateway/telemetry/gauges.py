"""Observable gauges read from Redis at collection time: queue depth by state, and pushes in
flight per endpoint.

``queue_depth`` (queue, state) counts a queue's tasks in each state (finished ones until their
retention sweeps them); ``endpoint_in_flight`` (queue, endpoint) the pushes an endpoint holds
now, as the claim script counts them for its concurrency limit; ``endpoint_circuit_open``
(queue, endpoint) is 1 while its circuit breaker is open or half open, else 0. They are shared
state, so every gateway reports the same values: aggregate them with ``max``, not ``sum``
(docs/observability.md).

OpenTelemetry calls observable callbacks synchronously, on the thread that collects: the OTLP
exporter's own thread, or the event loop's when ``/metrics`` renders. One reading (one Redis
round trip, :class:`~gateway.store.gauges.GaugeStore`) serves every callback of a collection:

- on another thread, the callback asks the event loop for a reading and waits for it (up to
  ``timeout``), unless one was taken in the last ``max_age`` seconds;
- on the loop's thread it cannot wait, so the caller refreshes first (``/metrics`` awaits
  :meth:`QueueGauges.refresh` before rendering) and the callbacks use that reading.

When Redis cannot be read the gauges report nothing for that collection, rather than old values.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from opentelemetry.metrics import CallbackOptions, Meter, Observation

from gateway.store.gauges import GaugeReading, GaugeStore

log = logging.getLogger(__name__)


class QueueGauges:
    def __init__(
        self,
        meter: Meter,
        store: GaugeStore,
        loop: asyncio.AbstractEventLoop,
        *,
        max_age: float = 1.0,
        timeout: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._clock = clock
        self._store = store
        self._loop = loop
        self._loop_thread = threading.get_ident()
        self._max_age = max_age
        self._timeout = timeout
        self._reading = GaugeReading()
        self._read_at = -float("inf")
        self._healthy = False
        self._refreshing: asyncio.Future[GaugeReading] | None = None
        self._stopped = False
        meter.create_observable_gauge(
            "queue_depth",
            callbacks=[self._depth],
            unit="{task}",
            description="Tasks of a queue in each state (finished ones until swept).",
        )
        meter.create_observable_gauge(
            "endpoint_in_flight",
            callbacks=[self._in_flight],
            unit="{push}",
            description="Pushes an endpoint holds now (its concurrency in use).",
        )
        meter.create_observable_gauge(
            "endpoint_circuit_open",
            callbacks=[self._circuit_open],
            description="1 while an endpoint's circuit breaker is open or half open, else 0.",
        )

    def stop(self) -> None:
        """Report nothing from now on (the app is stopping: Redis is about to close, and a
        last export must not wait on an event loop that is busy shutting down)."""
        self._stopped = True

    async def refresh(self) -> GaugeReading:
        """Read Redis now (concurrent callers share one read)."""
        if self._refreshing is None:
            self._refreshing = asyncio.ensure_future(self._read())
        refreshing = self._refreshing
        try:
            return await asyncio.shield(refreshing)
        finally:
            if self._refreshing is refreshing and refreshing.done():
                self._refreshing = None

    async def _read(self) -> GaugeReading:
        try:
            known = sorted(self._reading.queues)
            reading = await self._store.read(known)
            if reading.queues != frozenset(known):  # queues came or went: read those now
                reading = await self._store.read(sorted(reading.queues))
        except Exception:
            self._healthy = False
            raise
        self._reading, self._read_at, self._healthy = reading, self._clock(), True
        return reading

    def _current(self) -> GaugeReading | None:
        """This collection's reading, or None when Redis could not be read."""
        if self._stopped:
            return None
        fresh = self._clock() - self._read_at <= self._max_age
        if fresh or threading.get_ident() == self._loop_thread or self._loop.is_closed():
            return self._reading if self._healthy else None
        try:
            future = asyncio.run_coroutine_threadsafe(self.refresh(), self._loop)
            return future.result(self._timeout)
        except Exception as e:  # a stopped loop, Redis down, a timeout: report nothing
            log.warning("reading queue gauges failed: %s", e)
            return None

    def _observe(
        self, table: Callable[[GaugeReading], Mapping[str, Mapping[Any, int]]], key: str
    ) -> list[Observation]:
        """One observation per (queue, ``key``) of this collection's reading's ``table``."""
        reading = self._current()
        if reading is None:
            return []
        return [
            Observation(int(n), {"queue": queue, key: str(getattr(k, "value", k))})
            for queue, values in table(reading).items()
            for k, n in values.items()
        ]

    def _depth(self, options: CallbackOptions) -> Iterable[Observation]:
        return self._observe(lambda r: r.depth, "state")

    def _in_flight(self, options: CallbackOptions) -> Iterable[Observation]:
        return self._observe(lambda r: r.in_flight, "endpoint")

    def _circuit_open(self, options: CallbackOptions) -> Iterable[Observation]:
        return self._observe(lambda r: r.circuit_open, "endpoint")
