"""TallyHistogram: bucket counts kept per attribute set and handed to the SDK at collection
export exactly what the SDK's own ``Histogram.record`` exports, cumulative and delta; where the
SDK's parts are not what it expects, it records through the SDK."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from opentelemetry.metrics import NoOpMeterProvider
from opentelemetry.sdk.metrics import Histogram, MeterProvider
from opentelemetry.sdk.metrics.export import AggregationTemporality, InMemoryMetricReader
from opentelemetry.sdk.metrics.view import ExponentialBucketHistogramAggregation, View

from gateway.telemetry.histograms import TallyHistogram
from sdk.telemetry.metrics import ms_histogram

VALUES = [0, 0.4, 1, 1.5, 3, 3, 27, 999.5, 12_000, 4_000_000, -1, float("nan"), float("inf")]
A, B = {"queue": "a", "status": "ok"}, {"queue": "b", "status": "ok"}


def exported(reader: InMemoryMetricReader) -> dict[tuple[Any, ...], tuple[Any, ...]]:
    """Each series' points: attributes -> (count, sum, min, max, bucket counts)."""
    data = reader.get_metrics_data()
    found: dict[tuple[Any, ...], tuple[Any, ...]] = {}
    if data is None:  # a delta collection with nothing new
        return found
    for scope in data.resource_metrics[0].scope_metrics:
        for metric in scope.metrics:
            assert metric.name == "lat"
            assert metric.unit == "ms"
            for p in metric.data.data_points:
                found[tuple(sorted(p.attributes.items()))] = (  # type: ignore[union-attr]
                    p.count,  # type: ignore[union-attr]
                    p.sum,  # type: ignore[union-attr]
                    p.min,  # type: ignore[union-attr]
                    p.max,  # type: ignore[union-attr]
                    tuple(p.bucket_counts),  # type: ignore[union-attr]
                    tuple(p.explicit_bounds),  # type: ignore[union-attr]
                )
    return found


def reader(temporality: AggregationTemporality) -> InMemoryMetricReader:
    return InMemoryMetricReader(preferred_temporality={Histogram: temporality})


@pytest.mark.parametrize("temporality", list(AggregationTemporality)[1:])
def test_tallies_export_what_the_sdk_exports(temporality: AggregationTemporality) -> None:
    plain_reader, tally_reader = reader(temporality), reader(temporality)
    plain = ms_histogram(MeterProvider(metric_readers=[plain_reader]).get_meter("t"), "lat", "d")
    tally = TallyHistogram(MeterProvider(metric_readers=[tally_reader]).get_meter("t"), "lat", "d")
    assert tally.tallied
    for round_ in range(3):  # the second collection sees nothing new; the third, more
        if round_ != 1:
            for i, value in enumerate(VALUES):
                attributes = A if i % 3 else B
                plain.record(value, attributes)
                tally.record(value, attributes["queue"], attributes)
        assert exported(tally_reader) == exported(plain_reader)


def test_every_reader_gets_the_counts() -> None:
    first, second = reader(AggregationTemporality.CUMULATIVE), reader(AggregationTemporality.DELTA)
    tally = TallyHistogram(MeterProvider(metric_readers=[first, second]).get_meter("t"), "lat", "d")
    tally.record(5, "a", A)
    assert exported(first)[(("queue", "a"), ("status", "ok"))][0] == 1
    assert exported(second)[(("queue", "a"), ("status", "ok"))][0] == 1
    assert exported(first)[(("queue", "a"), ("status", "ok"))][0] == 1  # cumulative
    assert exported(second) == {}  # delta: nothing since


def test_two_recorders_on_one_meter_share_the_instrument() -> None:
    """The SDK hands out one instrument per name (and runs one callback per name)."""
    cumulative = reader(AggregationTemporality.CUMULATIVE)
    meter = MeterProvider(metric_readers=[cumulative]).get_meter("t")
    first, second = TallyHistogram(meter, "lat", "d"), TallyHistogram(meter, "lat", "d")
    first.record(1, "a", A)
    second.record(2, "a", A)
    assert exported(cumulative)[(("queue", "a"), ("status", "ok"))][:2] == (2, 3)


def test_a_view_that_changes_the_aggregation_gets_the_sdk_path() -> None:
    views = [View(instrument_name="lat", aggregation=ExponentialBucketHistogramAggregation())]
    plain = reader(AggregationTemporality.CUMULATIVE)
    tally = TallyHistogram(
        MeterProvider(metric_readers=[plain], views=views).get_meter("t"), "lat", "d"
    )
    assert not tally.tallied
    tally.record(5, "a", A)
    data = plain.get_metrics_data()
    assert data is not None
    (metric,) = data.resource_metrics[0].scope_metrics[0].metrics
    assert metric.data.data_points[0].count == 1  # type: ignore[union-attr]


def test_the_api_no_op_provider_costs_nothing() -> None:
    tally = TallyHistogram(NoOpMeterProvider().get_meter("t"), "lat", "d")
    assert not tally.tallied
    tally.record(5, "a", A)


def test_a_collection_in_another_thread_loses_no_count() -> None:
    """The OTLP exporter collects in its own thread while the event loop records."""
    delta = reader(AggregationTemporality.DELTA)
    tally = TallyHistogram(MeterProvider(metric_readers=[delta]).get_meter("t"), "lat", "d")
    done = threading.Event()
    counted: list[int] = []

    def collect() -> None:
        while not done.is_set():
            counted.extend(p[0] for p in exported(delta).values())

    collector = threading.Thread(target=collect)
    collector.start()
    try:
        for i in range(50_000):
            tally.record(i % 100, i % 7, {"queue": str(i % 7)})
    finally:
        done.set()
        collector.join()
    counted.extend(p[0] for p in exported(delta).values())
    assert sum(counted) == 50_000


@pytest.mark.parametrize("sdk_path", [False, True])
def test_record_many_exports_what_recording_each_exports(sdk_path: bool) -> None:
    """A claim's or a finish's values of one attribute set recorded at once, on the tallied
    path and on the SDK's, the values out of range (negative, NaN, infinite) dropped as one by
    one, the tally's min and max carried from the values recorded before."""
    views: list[View] = []
    if sdk_path:  # a view the tally does not know: the SDK path
        views = [View(instrument_name="lat", aggregation=ExponentialBucketHistogramAggregation())]
    each_reader = reader(AggregationTemporality.CUMULATIVE)
    many_reader = reader(AggregationTemporality.CUMULATIVE)
    each = TallyHistogram(
        MeterProvider(metric_readers=[each_reader], views=views).get_meter("t"), "lat", "d"
    )
    many = TallyHistogram(
        MeterProvider(metric_readers=[many_reader], views=views).get_meter("t"), "lat", "d"
    )
    assert each.tallied is many.tallied is not sdk_path
    for before in (50.0, 2.0):
        each.record(before, "a", A)
        many.record(before, "a", A)
    for value in VALUES:
        each.record(value, "a", A)
        each.record(value * 2, "b", B)
    many.record_many(VALUES, "a", A)
    many.record_many([v * 2 for v in VALUES], "b", B)
    many.record_many([], "a", A)
    got, want = exported_any(many_reader), exported_any(each_reader)
    assert got == want
    assert len(got) == 2


def exported_any(reader: InMemoryMetricReader) -> dict[tuple[Any, ...], tuple[Any, ...]]:
    """Each series' count, sum, min and max, whatever its aggregation."""
    data = reader.get_metrics_data()
    assert data is not None
    return {
        tuple(sorted(p.attributes.items())): (p.count, p.sum, p.min, p.max)  # type: ignore[union-attr]
        for scope in data.resource_metrics[0].scope_metrics
        for metric in scope.metrics
        for p in metric.data.data_points
    }
