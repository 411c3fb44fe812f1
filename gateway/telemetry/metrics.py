"""The gateway's metrics: what the dispatcher, services and recoverer record, in one place.

They call a :class:`Metrics` (a recorder whose methods do nothing: metrics off) or a
:class:`GatewayMetrics` (instruments made from the meter the app factory hands in), so neither
the hot path nor a test that does not care touches OpenTelemetry. The names, types and
attributes of DESIGN.md's table are exactly these; docs/observability.md tells what each
answers.

=======================  ===========  =============================  ========================
metric                   type         attributes                     recorded when
=======================  ===========  =============================  ========================
``tasks_enqueued``       counter      queue, task                    a task is stored
``tasks_selected``       counter      task, queue, role              a claim leases it
``time_in_queue``        histogram    task, queue, role              claim, since it was due
``tasks_processed``      counter      task, queue, status            an attempt ends
``execution_time``       histogram    task, queue, status            end, since the claim
``end_to_end_latency``   histogram    task, queue, status            end, since creation
``tasks_retried``        counter      task, version, queue           an attempt's end retries
``tasks_dead_lettered``  counter      task, version, queue           a task ends ``dead``
``push_duration``        histogram    queue, endpoint, answer        POST to answer
``circuit_changes``      counter      queue, endpoint, state         a circuit opens/closes
=======================  ===========  =============================  ========================

(plus the gauges of :mod:`gateway.telemetry.gauges`). Histograms are in milliseconds with
explicit buckets from 1 ms to 1 h (:data:`MS_BUCKETS`). ``role`` is ``gateway`` here; the SDK
worker records the same names with ``role=worker`` (:mod:`sdk.telemetry.metrics`).

``status`` of ``tasks_processed`` and ``execution_time`` is the attempt's outcome
(:class:`~sdk.wire.AttemptOutcome`: succeeded, error, failed, busy, gone, expired, stalled,
released), ``cancelled`` when the end cancelled the task, or ``dropped``: the worker refused
the push as an unknown task (404) or a bad signature (401, 403), which is how an old worker
receiving new tasks, or a misconfigured secret, shows. ``status`` of ``end_to_end_latency`` is
the task's final state (succeeded, failed, dead, cancelled) or ``dropped``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from opentelemetry.metrics import Meter

from gateway.store.records import Lease
from gateway.store.tasks import Fence, Finish, Finished
from gateway.telemetry.histograms import TallyHistogram
from gateway.telemetry.labels import TaskLabels
from sdk.telemetry.metrics import TallyCounter
from sdk.wire import AttemptOutcome, TaskState

DROPPED_STATUSES = frozenset({401, 403, 404})
"""Answers that mean the worker refused the push itself: bad signature, unknown task."""

ROLE = "gateway"
RETRIED_OUTCOMES = frozenset(
    {AttemptOutcome.ERROR, AttemptOutcome.BUSY, AttemptOutcome.EXPIRED, AttemptOutcome.STALLED}
)
BACK_IN_QUEUE = frozenset({TaskState.SCHEDULED, TaskState.QUEUED})
FINAL_STATES = frozenset(
    {TaskState.SUCCEEDED, TaskState.FAILED, TaskState.DEAD, TaskState.CANCELLED}
)

Attributes = Mapping[str, str]


def attempt_status(finish: Finish, done: Finished) -> str:
    """The ``status`` attribute of an attempt's end (module docstring)."""
    if done.state is TaskState.CANCELLED:
        return "cancelled"
    if finish.outcome is AttemptOutcome.FAILED and finish.http_status in DROPPED_STATUSES:
        return "dropped"
    return finish.outcome.value


def final_status(status: str, state: TaskState) -> str:
    """The ``status`` attribute of a task's end: its final state, or ``dropped``."""
    return status if status == "dropped" else state.value


def answer_class(status: int | None, failure: str | None) -> str:
    """A push's answer, bounded: ``2xx`` … ``5xx``, ``timeout`` or ``connection_error``."""
    if status is not None:
        return f"{status // 100}xx"
    if failure is not None and failure.startswith("no answer within"):
        return "timeout"
    return "connection_error"


class Metrics:
    """The recorder with metrics off: every method does nothing. :class:`GatewayMetrics`
    records; callers hold either, typed as this."""

    def enqueued(self, queue: str, names: Iterable[str]) -> None:
        """Tasks stored by an enqueue (not the duplicates it matched)."""

    def selected(self, leases: Sequence[Lease]) -> None:
        """Tasks a claim leased for dispatch."""

    def pushed(self, queue: str, endpoint: str, answer: str, ms: float) -> None:
        """One push (single or batch) answered, or given up, after ``ms``."""

    def finished(
        self, queue: str, finishes: Sequence[Finish], done: Sequence[Finished], now_ms: int
    ) -> None:
        """Attempts ended by one finish script call (``done[i]`` answers ``finishes[i]``)."""


class GatewayMetrics(Metrics):
    """Records into instruments made from ``meter``; attributes through ``labels``.

    Attribute dicts are made once per combination and reused: the SDK keys its series by them,
    and a flood of tasks should allocate nothing per task beyond what it must. Counters are
    :class:`~sdk.telemetry.metrics.TallyCounter` (a dict update per task, reported at each
    collection); histograms are :class:`~gateway.telemetry.histograms.TallyHistogram` (bucket
    counts per attribute set, handed to the SDK at each collection).
    """

    def __init__(self, meter: Meter, labels: TaskLabels) -> None:
        self._labels = labels
        self._attrs: dict[tuple[str, ...], Attributes] = {}

        def counter(name: str, *, unit: str, description: str) -> TallyCounter:
            return TallyCounter(meter, name, unit=unit, description=description)

        def ms(name: str, description: str) -> TallyHistogram:
            return TallyHistogram(meter, name, description)

        self._enqueued = counter(
            "tasks_enqueued", unit="{task}", description="Tasks stored by enqueues."
        )
        self._selected = counter(
            "tasks_selected", unit="{task}", description="Tasks leased for an attempt."
        )
        self._time_in_queue = ms("time_in_queue", "From when a task was due (run_at) to its lease.")
        self._processed = counter(
            "tasks_processed", unit="{task}", description="Attempts ended, by status."
        )
        self._execution = ms("execution_time", "From an attempt's lease to its end.")
        self._latency = ms("end_to_end_latency", "From a task's creation to its final state.")
        self._retried = counter(
            "tasks_retried", unit="{task}", description="Attempt ends that lead to a retry."
        )
        self._dead = counter(
            "tasks_dead_lettered", unit="{task}", description="Tasks that ended dead."
        )
        self._push_duration = ms(
            "push_duration", "From a push's POST to its answer; its count counts the pushes."
        )
        self._circuits = counter(
            "circuit_changes",
            unit="{change}",
            description="Endpoint circuit breakers opening or closing.",
        )

    def _count(self, counter: TallyCounter, *key: str) -> None:
        counter.add(1, key, self._a(*key))

    def _a(self, *key: str) -> Attributes:
        """The attribute dict of ``key`` (its first item names the kind), made once."""
        found = self._attrs.get(key)
        if found is None:
            kind, values = key[0], key[1:]
            found = self._attrs[key] = dict(zip(KINDS[kind], values, strict=True))
        return found

    def enqueued(self, queue: str, names: Iterable[str]) -> None:
        # By name first: the tasks of a batch mostly share one (labelled once, not 1,000 times).
        task = self._labels.task
        if isinstance(names, Sequence) and len(names) == 1:  # a lone enqueue: no Counter
            key = ("qt", queue, task(queue, names[0]))
            self._enqueued.add(1, key, self._a(*key))
            return
        for name, count in Counter(names).items():
            key = ("qt", queue, task(queue, name))
            self._enqueued.add(count, key, self._a(*key))

    def selected(self, leases: Sequence[Lease]) -> None:
        # A claim's tasks mostly share a name: labelled, counted and recorded once per name.
        task = self._labels.task
        waited: dict[tuple[str, str], list[int]] = {}
        for lease in leases:
            ms = max(0, lease.started_ms - lease.ready_ms)
            found = waited.get((lease.queue, lease.name))
            if found is None:
                waited[lease.queue, lease.name] = [ms]
            else:
                found.append(ms)
        for (queue, name), values in waited.items():
            key = ("tqr", task(queue, name), queue, ROLE)
            attributes = self._a(*key)
            self._time_in_queue.record_many(values, key, attributes)
            self._selected.add(len(values), key, attributes)

    def pushed(self, queue: str, endpoint: str, answer: str, ms: float) -> None:
        key = ("qea", queue, endpoint, answer)
        self._push_duration.record(ms, key, self._a(*key))

    def finished(
        self, queue: str, finishes: Sequence[Finish], done: Sequence[Finished], now_ms: int
    ) -> None:
        # A finish's ends mostly share a name and a status: labelled, counted and recorded
        # once each (the execution times of one key are its processed count).
        tasks: dict[str, str] = {}
        executed: dict[tuple[str, ...], list[int]] = {}
        latencies: dict[tuple[str, ...], list[int]] = {}
        for finish, end in zip(finishes, done, strict=True):
            if end.fence is not Fence.OK or end.state is None:
                continue  # stale or refused: nothing ended
            task = tasks.get(end.name)
            if task is None:
                task = tasks[end.name] = self._labels.task(queue, end.name)
            status = attempt_status(finish, end)
            key: tuple[str, ...] = ("tqs", task, queue, status)
            ms = max(0, now_ms - end.started_ms)
            values = executed.get(key)
            if values is None:
                executed[key] = [ms]
            else:
                values.append(ms)
            state = end.state
            if state in FINAL_STATES:
                final = ("tqs", task, queue, final_status(status, state))
                ms = max(0, now_ms - end.created_ms)
                values = latencies.get(final)
                if values is None:
                    latencies[final] = [ms]
                else:
                    values.append(ms)
                if state is TaskState.DEAD:
                    version = self._labels.version(queue, end.version)
                    self._count(self._dead, "tvq", task, version, queue)
            elif state in BACK_IN_QUEUE and finish.outcome in RETRIED_OUTCOMES:
                version = self._labels.version(queue, end.version)
                self._count(self._retried, "tvq", task, version, queue)
            if end.circuit:
                self._count(self._circuits, "qes", queue, end.endpoint_id, end.circuit)
        for key, values in executed.items():
            attributes = self._a(*key)
            self._execution.record_many(values, key, attributes)
            self._processed.add(len(values), key, attributes)
        for key, values in latencies.items():
            self._latency.record_many(values, key, self._a(*key))


KINDS: dict[str, tuple[str, ...]] = {
    "qt": ("queue", "task"),
    "tqr": ("task", "queue", "role"),
    "tqs": ("task", "queue", "status"),
    "tvq": ("task", "version", "queue"),
    "qea": ("queue", "endpoint", "answer"),
    "qes": ("queue", "endpoint", "state"),
}
