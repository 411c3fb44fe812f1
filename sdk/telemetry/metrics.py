"""The worker's metrics, the worker-side half of the gateway's (``role=worker``).

Recorded by :class:`~sdk.worker.Worker` into the meter provider it is given
(``Worker(..., meter_provider=...)``) or else the one the application set with
``opentelemetry.metrics.set_meter_provider``; with neither, the API's no-op provider takes
the calls and they cost next to nothing (instruments made before a provider is set start
recording once it is).

=====================  =========  ===========================  =============================
metric                 type       attributes                   recorded when
=====================  =========  ===========================  =============================
``tasks_selected``     counter    task, queue, role=worker     a push delivers a task
``time_in_queue``      histogram  task, queue, role=worker     the same: since it was due
                                                               (the push's ``ready_at``; the
                                                               two machines' clocks differ)
``tasks_processed``    counter    task, queue, status          a task ends or is refused
``execution_time``     histogram  task, queue, status          a task function ends
``worker_uptime``      gauge, s   (none)                       at collection
=====================  =========  ===========================  =============================

``status``: succeeded, error (retried), failed, cancelled, released (handed back at
shutdown), lease_lost, busy (refused: no free slot), dropped (refused: no such task here; or a
push whose signature no secret verifies, then with task and queue ``*``). Task names other than
the worker's own are recorded as ``other``.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Hashable, Mapping
from datetime import UTC, datetime

from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, Histogram, Meter, MeterProvider, Observation

from sdk.outcomes import Refusal, Stop, Verdict
from sdk.wire import ErrorIn, PushBody

MS_BUCKETS: tuple[float, ...] = (
    1, 2.5, 5, 10, 25, 50, 100, 250, 500,
    1_000, 2_500, 5_000, 10_000, 30_000, 60_000,
    120_000, 300_000, 600_000, 1_800_000, 3_600_000,
)  # fmt: skip
"""Histogram bucket boundaries in ms, 1 ms to 1 h: the gateway's and the worker's."""

Key = tuple[str, str, str]

METER_NAME = "jobgate.worker"
ROLE = "worker"
ANY = "*"
OTHER = "other"


def ms_histogram(meter: Meter, name: str, description: str) -> Histogram:
    """A histogram in ms with the buckets of :data:`MS_BUCKETS` (the gateway's use it too)."""
    return meter.create_histogram(
        name,
        unit="ms",
        description=description,
        explicit_bucket_boundaries_advisory=list(MS_BUCKETS),
    )


class TallyCounter:
    """A monotonic counter kept as plain sums per attribute set and reported through an
    OpenTelemetry observable counter at each collection.

    The SDK's synchronous ``Counter.add`` cleans and hashes its attribute dict on every call
    (several µs); on a hot path that was a third of what metrics cost per task. An observable
    counter is OpenTelemetry's instrument for counts summed elsewhere: it exports the same
    monotonic sum (a Prometheus ``_total``), and adding here is a dict update. ``key`` names
    the attribute set (hashable, made by the caller); ``attributes`` is its dict, kept from the
    first add of that key.
    """

    def __init__(self, meter: Meter, name: str, *, unit: str, description: str) -> None:
        self._totals: dict[Hashable, int] = {}
        self._attributes: dict[Hashable, Mapping[str, str]] = {}
        meter.create_observable_counter(
            name, callbacks=[self._observe], unit=unit, description=description
        )

    def add(self, amount: int, key: Hashable, attributes: Mapping[str, str]) -> None:
        total = self._totals.get(key)
        if total is None:
            self._attributes[key] = attributes  # before the total: a collection sees both
            total = 0
        self._totals[key] = total + amount

    def _observe(self, options: CallbackOptions) -> list[Observation]:
        # A collection may run in another thread (the OTLP exporter's): copy, an atomic step.
        totals = self._totals.copy()
        return [Observation(total, self._attributes[key]) for key, total in totals.items()]


class WorkerMetrics:
    """What one worker records; attribute dicts are made once per combination."""

    def __init__(self, tasks: Collection[str], provider: MeterProvider | None = None) -> None:
        meter = (provider or metrics.get_meter_provider()).get_meter(METER_NAME)
        self._tasks = tasks
        self._started = time.monotonic()
        self._attrs: dict[tuple[str, str, str], Mapping[str, str]] = {}
        self._selected = TallyCounter(
            meter, "tasks_selected", unit="{task}", description="Tasks delivered to this worker."
        )
        self._time_in_queue = ms_histogram(
            meter, "time_in_queue", "From when a task was due to its delivery here."
        )
        self._processed = TallyCounter(
            meter,
            "tasks_processed",
            unit="{task}",
            description="Tasks ended or refused, by status.",
        )
        self._execution = ms_histogram(meter, "execution_time", "How long task functions ran here.")
        meter.create_observable_gauge(
            "worker_uptime",
            callbacks=[self._uptime],
            unit="s",
            description="Seconds since this worker started.",
        )

    def _a(self, task: str, queue: str, last: str, key: str) -> tuple[Key, Mapping[str, str]]:
        """The attribute set's key and its dict, made once."""
        k = (task, queue, last)
        found = self._attrs.get(k)
        if found is None:
            found = self._attrs[k] = {"task": task, "queue": queue, key: last}
        return k, found

    def _task(self, name: str) -> str:
        return name if name in self._tasks else OTHER

    def delivered(self, push: PushBody) -> None:
        """A push delivered this task (before it is admitted or refused)."""
        key, attrs = self._a(self._task(push.name), push.queue, ROLE, "role")
        self._selected.add(1, key, attrs)
        if push.ready_at is not None:
            waited = (datetime.now(UTC) - push.ready_at).total_seconds() * 1000
            self._time_in_queue.record(max(0.0, waited), attrs)

    def processed(self, push: PushBody | None, status: str, ms: float | None = None) -> None:
        """The task ended (``ms``: how long its function ran) or was refused."""
        task, queue = (ANY, ANY) if push is None else (self._task(push.name), push.queue)
        key, attrs = self._a(task, queue, status, "status")
        self._processed.add(1, key, attrs)
        if ms is not None:
            self._execution.record(ms, attrs)

    def ended(
        self, push: PushBody, verdict: Verdict | None, stopped: Stop | None, ms: float
    ) -> None:
        """The task's function ended (or was stopped, or abandoned) after ``ms``."""
        self.processed(push, verdict_status(verdict, stopped), ms)

    def refused(self, push: PushBody, refusal: Refusal) -> None:
        """The task was not run: busy (429/503), no such task (404), bad arguments (422)."""
        status = refusal.status
        self.processed(
            push, "busy" if status in (429, 503) else "dropped" if status == 404 else "failed"
        )

    def _uptime(self, options: CallbackOptions) -> list[Observation]:
        return [Observation(time.monotonic() - self._started)]


def verdict_status(verdict: Verdict | None, stopped: Stop | None) -> str:
    """The ``status`` of a task's end here (module docstring)."""
    if verdict is None:
        return "lease_lost"
    if verdict.release:
        return "released"
    final = verdict.final
    if not isinstance(final, ErrorIn):
        return "succeeded"
    if stopped is Stop.CANCEL:
        return "cancelled"
    return "error" if final.retryable else "failed"
