"""A claim's or a finish's tasks recorded together (labelled and counted once per name and
status) export exactly what recording them one at a time exports."""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from gateway.store.records import Lease
from gateway.store.tasks import Fence, Finish, Finished
from gateway.telemetry.labels import TaskLabels
from gateway.telemetry.metrics import GatewayMetrics
from sdk.wire import AttemptOutcome, TaskState

NOW = 1_800_000_000_000


def lease(i: int, name: str) -> Lease:
    return Lease(
        queue="q",
        task_id=f"t{i}",
        endpoint_id="e",
        token="x",
        name=name,
        attempt=1,
        max_attempts=None,
        payload_json="null",
        checkpoint_json=None,
        expires_ms=NOW + 30_000,
        deadline_ms=NOW + 60_000,
        traceparent=None,
        ready_ms=NOW - 10 * i,
        started_ms=NOW,
    )


def ends() -> list[tuple[Finish, Finished]]:
    found = []
    for i, (name, outcome, state) in enumerate(
        [
            ("a", AttemptOutcome.SUCCEEDED, TaskState.SUCCEEDED),
            ("a", AttemptOutcome.SUCCEEDED, TaskState.SUCCEEDED),
            ("b", AttemptOutcome.SUCCEEDED, TaskState.SUCCEEDED),
            ("a", AttemptOutcome.ERROR, TaskState.SCHEDULED),
            ("b", AttemptOutcome.FAILED, TaskState.DEAD),
            ("a", AttemptOutcome.SUCCEEDED, TaskState.SUCCEEDED),
        ]
    ):
        finish = Finish(f"t{i}", "x", outcome, 200 if state is TaskState.SUCCEEDED else 500)
        done = Finished(Fence.OK, state, name=name, started_ms=NOW - 5 * i, created_ms=NOW - 50 * i)
        found.append((finish, done))
    found.append((Finish("t9", "x", AttemptOutcome.SUCCEEDED, 200), Finished(Fence.STALE)))
    return found


def recorded(together: bool) -> dict[tuple[Any, ...], Any]:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    metrics = GatewayMetrics(provider.get_meter("t"), TaskLabels(lambda q: None, lambda q: ()))
    leases = [lease(i, "a" if i % 3 else "b") for i in range(7)]
    pairs = ends()
    if together:
        metrics.selected(leases)
        metrics.finished("q", [f for f, _ in pairs], [d for _, d in pairs], NOW)
    else:
        for each in leases:
            metrics.selected([each])
        for finish, done in pairs:
            metrics.finished("q", [finish], [done], NOW)
    data = reader.get_metrics_data()
    assert data is not None
    points: dict[tuple[Any, ...], Any] = {}
    for scope in data.resource_metrics[0].scope_metrics:
        for metric in scope.metrics:
            for p in metric.data.data_points:
                attributes = tuple(sorted(p.attributes.items()))  # type: ignore[union-attr]
                value = getattr(p, "value", None)
                if value is None:
                    value = (p.count, p.sum, tuple(p.bucket_counts))  # type: ignore[union-attr]
                points[metric.name, attributes] = value
    provider.shutdown()
    return points


def test_recording_a_batch_together_exports_what_one_at_a_time_does() -> None:
    together = recorded(together=True)
    assert together == recorded(together=False)
    names = {name for name, _ in together}
    assert {"tasks_selected", "tasks_processed", "execution_time", "time_in_queue"} <= names
