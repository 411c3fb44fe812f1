"""Bounded metric attributes: which ``task`` (and ``version``) value a measurement carries.

A time series per task name is what operators want, until a producer sends a new name per
task (a flood of generated names) and the metrics backend drowns. So, per queue:

- the queue's policy ``metrics_granularity`` may say ``queue``: every task of the queue is
  recorded as task ``*``, one series per queue whatever the names;
- otherwise a name reported by an endpoint in the task catalog is kept as is; any other name is
  kept while fewer than ``max_names`` such names were seen in the queue by this process, and
  folded into ``other`` past that. Versions are kept the same way (``max_names`` per queue).

Never a task id, a payload value or anything else a producer chooses freely without bound.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from sdk.wire import MetricsGranularity

ALL_TASKS = "*"
OTHER = "other"


class TaskLabels:
    """Maps task names and versions to attribute values, remembering what each queue kept.

    ``granularity(queue)`` and ``cataloged(queue)`` read cached views (the directory's and the
    catalog's): no Redis on the hot path. An unknown queue counts as per-task.
    """

    def __init__(
        self,
        granularity: Callable[[str], MetricsGranularity | None],
        cataloged: Callable[[str], Collection[str]],
        *,
        max_names: int = 100,
    ) -> None:
        self._granularity = granularity
        self._cataloged = cataloged
        self._max_names = max_names
        self._names: dict[str, set[str]] = {}  # queue -> uncataloged names kept
        self._versions: dict[str, set[str]] = {}

    def task(self, queue: str, name: str) -> str:
        if self._granularity(queue) is MetricsGranularity.QUEUE:
            return ALL_TASKS
        kept = self._names.get(queue)
        if kept is None:
            kept = self._names[queue] = set()
        if name in kept:
            return name
        if name in self._cataloged(queue):
            return name
        if len(kept) < self._max_names:
            kept.add(name)
            return name
        return OTHER

    def version(self, queue: str, version: str) -> str:
        if not version:
            return ""
        if self._granularity(queue) is MetricsGranularity.QUEUE:
            return ALL_TASKS
        kept = self._versions.setdefault(queue, set())
        if version in kept:
            return version
        if len(kept) < self._max_names:
            kept.add(version)
            return version
        return OTHER
