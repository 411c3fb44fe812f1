"""Histograms kept as tallies: bucket counts per attribute set, handed to OpenTelemetry's SDK at
each collection instead of one SDK measurement per task.

The SDK's synchronous ``Histogram.record`` cleans, copies and hashes its attribute dict and
builds a ``Measurement`` on every call: 4 to 29 µs per measurement on this project's machine
(bench/RESULTS.md, "Metrics overhead" and "CPU per task in the drain"), three or four per task
on the dispatch path, where a task's whole gateway CPU was some 80 µs. A
:class:`TallyHistogram` records in well under a microsecond (a bisect and a few additions under
a lock) and, when the provider collects, adds what it counted to the SDK's own aggregation of
each attribute set: the exported data (buckets, count, sum, min, max; cumulative or delta as
the reader asks) is the same as the SDK's. Exemplars are not sampled for these histograms.

Handing counts to the SDK needs its aggregation objects, which it does not make public (there is
no bound instrument and no ``MetricProducer`` in the Python SDK). :func:`_sinks` finds them and
checks each is the explicit-bucket histogram the instrument asked for; where anything differs
(another SDK version, a view that changes the aggregation, the API's no-op provider) the
histogram records through ``Histogram.record`` as before. A test holds both paths' exported
data equal, so an SDK that moves these parts fails it rather than exporting wrong figures.
"""

from __future__ import annotations

import math
import threading
import weakref
from bisect import bisect_left
from collections.abc import Hashable, Iterable, Mapping
from typing import Any

from opentelemetry.metrics import CallbackOptions, Histogram, Meter, Observation

from sdk.telemetry.metrics import MS_BUCKETS, ms_histogram

try:  # the SDK's private parts (module docstring); without them, the plain path
    from opentelemetry.sdk.metrics._internal._view_instrument_match import _hash_attributes
    from opentelemetry.sdk.metrics._internal.aggregation import (
        _ExplicitBucketHistogramAggregation,
    )
except ImportError:  # pragma: no cover - another SDK layout
    _hash_attributes = None  # type: ignore[assignment]
    _ExplicitBucketHistogramAggregation = None  # type: ignore[assignment,misc]


class _Tally:
    """What was recorded for one attribute set since the last collection."""

    __slots__ = ("attributes", "counts", "max", "min", "sum")

    def __init__(self, attributes: Mapping[str, str]) -> None:
        self.attributes = attributes
        self.counts = [0] * (len(MS_BUCKETS) + 1)
        self.sum = 0.0
        self.min = math.inf
        self.max = -math.inf


class _Shared:
    """The tallies of one SDK histogram, shared by every :class:`TallyHistogram` made on it (the
    SDK hands out one instrument per name, and runs only the first callback of a name)."""

    def __init__(self, histogram: Histogram) -> None:
        self.histogram = weakref.ref(histogram)  # not a strong one: the key of _SHARED
        self.tallies: dict[Hashable, _Tally] = {}
        self.lock = threading.Lock()  # a collection may run in another thread (OTLP's)

    def hand_over(self, options: CallbackOptions) -> list[Observation]:
        with self.lock:
            tallies, self.tallies = self.tallies, {}
        histogram = self.histogram()
        if histogram is None:
            return []
        for tally in tallies.values():
            for aggregation in _sinks(histogram, tally.attributes):
                _add(aggregation, tally)
        return []


_SHARED: weakref.WeakKeyDictionary[Histogram, _Shared] = weakref.WeakKeyDictionary()
_SHARING = threading.Lock()


class TallyHistogram:
    """A histogram in ms with the buckets of :data:`~sdk.telemetry.metrics.MS_BUCKETS`.

    ``record(ms, key, attributes)``: ``key`` names the attribute set (hashable, made by the
    caller), ``attributes`` is its dict, kept from the first record of that key until the next
    collection. Negative and non-finite values are dropped, as the SDK drops them.
    """

    def __init__(self, meter: Meter, name: str, description: str) -> None:
        self._histogram = histogram = ms_histogram(meter, name, description)
        self.tallied = _matches(histogram) is not None
        with _SHARING:
            shared = _SHARED.get(histogram) if self.tallied else None
            if self.tallied and shared is None:
                shared = _SHARED[histogram] = _Shared(histogram)
                # Observable callbacks run at the start of every collection, before the SDK
                # reads its aggregations: the counts are handed over then. It observes nothing.
                meter.create_observable_gauge(f"jobgate.tally.{name}", callbacks=[shared.hand_over])
        self._shared = shared

    def record(self, ms: float, key: Hashable, attributes: Mapping[str, str]) -> None:
        shared = self._shared
        if shared is None:
            self._histogram.record(ms, attributes)
            return
        if not 0 <= ms < math.inf:
            return
        bucket = bisect_left(MS_BUCKETS, ms)
        with shared.lock:
            tally = shared.tallies.get(key)
            if tally is None:
                tally = shared.tallies[key] = _Tally(attributes)
            tally.counts[bucket] += 1
            tally.sum += ms
            if ms < tally.min:
                tally.min = ms
            if ms > tally.max:
                tally.max = ms

    def record_many(
        self, values: Iterable[float], key: Hashable, attributes: Mapping[str, str]
    ) -> None:
        """:meth:`record` of each of ``values``, all of one attribute set: the lock taken and
        the tally found once (a claim's or a finish's tasks mostly share one)."""
        shared = self._shared
        if shared is None:
            for ms in values:
                self._histogram.record(ms, attributes)
            return
        with shared.lock:
            tally = shared.tallies.get(key)
            if tally is None:
                tally = shared.tallies[key] = _Tally(attributes)
            counts, total, low, high = tally.counts, tally.sum, tally.min, tally.max
            for ms in values:
                if not 0 <= ms < math.inf:
                    continue
                counts[bisect_left(MS_BUCKETS, ms)] += 1
                total += ms
                if ms < low:
                    low = ms
                if ms > high:
                    high = ms
            tally.sum, tally.min, tally.max = total, low, high


def _matches(histogram: Histogram) -> list[Any] | None:
    """The SDK's view matches of ``histogram``, one per reader and view, or None when the SDK's
    parts are not the ones this module knows or a match does not aggregate as an explicit-bucket
    histogram of these buckets (then the histogram records through the SDK)."""
    try:
        storages = list(histogram._measurement_consumer._reader_storages.values())  # type: ignore[attr-defined]
        matches = [m for s in storages for m in s._get_or_init_view_instrument_match(histogram)]
        for match in matches:
            aggregation = match._aggregation
            if not (
                _hash_attributes is not None
                and isinstance(aggregation, _ExplicitBucketHistogramAggregation)
                and aggregation._boundaries == MS_BUCKETS
                and aggregation._record_min_max
            ):
                return None
    except (AttributeError, TypeError):
        return None
    return matches


def _sinks(histogram: Histogram, attributes: Mapping[str, str]) -> list[Any]:
    """The SDK's aggregation of ``attributes`` in each of ``histogram``'s view matches, made if
    new as a measurement would make it (the view's attribute keys, the cardinality limit)."""
    found = []
    for match in _matches(histogram) or ():
        kept = dict(attributes)
        keys = match._view._attribute_keys
        if keys is not None:
            kept = {k: v for k, v in kept.items() if k in keys}
        with match._lock:
            found.append(match._get_or_create_aggregation(_hash_attributes(kept), kept))
    return found


def _add(aggregation: Any, tally: _Tally) -> None:
    """Add a tally to one SDK aggregation, as that many ``aggregate`` calls would."""
    with aggregation._lock:
        if aggregation._value is None:
            aggregation._value = aggregation._get_empty_bucket_counts()
        value = aggregation._value
        for i, count in enumerate(tally.counts):
            value[i] += count
        aggregation._sum += tally.sum
        aggregation._min = min(aggregation._min, tally.min)
        aggregation._max = max(aggregation._max, tally.max)
