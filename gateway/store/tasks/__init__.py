"""Tasks in Redis: every state change is one script of ``lua/``; this package only calls them.

:class:`TaskStore` is the one object the services, the dispatcher and the recoverer hold. Its
methods live by the state change they wrap: :mod:`.enqueue` (storing new tasks), :mod:`.leases`
(claims, heartbeats, log lines), :mod:`.finish` (ends of attempts, cancels), :mod:`.recovery`
(due tasks, expired and stalled leases, sweeping), :mod:`.due` (the due index across queues) and
:mod:`.reads` (views that change nothing).

The Redis client must decode responses (``decode_responses=True``).
"""

from __future__ import annotations

from gateway.store.tasks.due import DueIndexing
from gateway.store.tasks.enqueue import Enqueued, Enqueuing, Stored
from gateway.store.tasks.finish import Cancel, CancelResult, Ended, Finish, Finished, Finishing
from gateway.store.tasks.leases import (
    LOG_LINES_KEPT,
    Claim,
    ClaimOrder,
    ClaimStatus,
    Fence,
    Heartbeat,
    Leasing,
)
from gateway.store.tasks.reads import Reading
from gateway.store.tasks.recovery import Expired, Recovering

__all__ = [
    "LOG_LINES_KEPT",
    "Cancel",
    "CancelResult",
    "Claim",
    "ClaimOrder",
    "ClaimStatus",
    "Ended",
    "Enqueued",
    "Expired",
    "Fence",
    "Finish",
    "Finished",
    "Heartbeat",
    "Stored",
    "TaskStore",
]


class TaskStore(Enqueuing, Leasing, Finishing, Recovering, DueIndexing, Reading):
    """Atomic task state changes of every queue."""
