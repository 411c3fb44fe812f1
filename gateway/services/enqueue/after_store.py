"""What an enqueue does once the store answered, read from each task's outcome: the names to
count as enqueued, the dependencies in other queues to link, and how many tasks became ready
(for the wake-up of this gateway's dispatcher and pull polls)."""

from __future__ import annotations

from collections.abc import Sequence

from gateway.store.records import NewTask
from gateway.store.tasks import Stored
from sdk.wire import TaskState


def stored_names(new: Sequence[NewTask], stored: Sequence[Stored]) -> list[str]:
    """The name of each task stored (not the duplicates matched, nor those a flow took)."""
    return [n.name for n, s in zip(new, stored, strict=True) if s.state]


def cross_links(new: Sequence[NewTask], stored: Sequence[Stored]) -> list[tuple[str, str, str]]:
    """(task id, dependency's queue, dependency) of each stored task's dependency in another
    queue: registered with it after the script (``DependencyStore.link``)."""
    return [
        (n.id, q, d) for n, s in zip(new, stored, strict=True) if s.state for q, d in n.cross_deps
    ]


def ready_count(stored: Sequence[Stored]) -> int:
    """How many tasks the enqueue made ready: stored queued, or a debounce's pending task it
    released to run now."""
    return sum(
        s.state is TaskState.QUEUED
        or (s.replaced is not None and s.replaced.state is TaskState.QUEUED)
        for s in stored
    )
