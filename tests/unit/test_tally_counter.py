"""TallyCounter: counts summed in a dict, exported by OpenTelemetry as a monotonic counter
whose totals are cumulative across collections, one series per attribute set."""

from __future__ import annotations

import threading

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, Sum

from sdk.telemetry.metrics import TallyCounter


def totals(reader: InMemoryMetricReader) -> dict[tuple[tuple[str, str], ...], int]:
    data = reader.get_metrics_data()
    assert data is not None
    (metric,) = data.resource_metrics[0].scope_metrics[0].metrics
    assert metric.name == "things"
    assert metric.unit == "{thing}"
    assert isinstance(metric.data, Sum)
    assert metric.data.is_monotonic
    return {
        tuple(sorted(point.attributes.items())): int(point.value)  # type: ignore[union-attr]
        for point in metric.data.data_points
    }


def test_totals_are_cumulative_per_attribute_set() -> None:
    reader = InMemoryMetricReader()
    meter = MeterProvider(metric_readers=[reader]).get_meter("t")
    counter = TallyCounter(meter, "things", unit="{thing}", description="Things.")
    a, b = {"queue": "a"}, {"queue": "b"}
    counter.add(1, "a", a)
    counter.add(2, "a", a)
    counter.add(5, "b", b)
    assert totals(reader) == {(("queue", "a"),): 3, (("queue", "b"),): 5}
    counter.add(1, "b", b)
    assert totals(reader) == {(("queue", "a"),): 3, (("queue", "b"),): 6}


def test_a_collection_in_another_thread_sees_consistent_totals() -> None:
    """The OTLP exporter collects in its own thread while the event loop adds new series."""
    reader = InMemoryMetricReader()
    meter = MeterProvider(metric_readers=[reader]).get_meter("t")
    counter = TallyCounter(meter, "things", unit="{thing}", description="Things.")
    done = threading.Event()
    errors: list[BaseException] = []

    def collect() -> None:
        try:
            while not done.is_set():
                reader.get_metrics_data()
        except BaseException as e:  # pragma: no cover - the failure this test looks for
            errors.append(e)

    collector = threading.Thread(target=collect)
    collector.start()
    try:
        for i in range(20_000):
            key = str(i % 2_000)
            counter.add(1, key, {"n": key})
    finally:
        done.set()
        collector.join()
    assert errors == []
    found = totals(reader)
    assert len(found) == 2_000
    assert set(found.values()) == {10}
