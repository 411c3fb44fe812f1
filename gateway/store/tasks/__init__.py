"""Tasks in Redis: every state change is one script of ``lua/``; this package only calls them.

:class:`TaskStore` is the one object the services, the dispatcher and the recoverer hold. Its
methods live by the state change they wrap: :mod:`.enqueue` (storing new tasks: its words in
:mod:`.enqueue_words`, its reply read in :mod:`.enqueue_reply`), :mod:`.leases` (claims,
heartbeats, log lines; a claim that rides in another round trip: :mod:`.carried`),
:mod:`.finish` (ends of attempts: :mod:`.finish_words`, :mod:`.finish_reply`), :mod:`.cancel`,
:mod:`.recovery` (due tasks, expired and stalled leases, sweeping), :mod:`.due` (the due index
across queues), :mod:`.waits` (waits for events, cancel_on), :mod:`.invokes` (waits for
children), :mod:`.calls` (durable HTTP calls) and :mod:`.reads` (views that change nothing).

The Redis client must decode responses (``decode_responses=True``).
"""

from __future__ import annotations

from gateway.store.tasks.calls import Calling, CallWait, ClaimedCall
from gateway.store.tasks.cancel import Cancel, Cancelling, CancelResult
from gateway.store.tasks.carried import ClaimOrder
from gateway.store.tasks.due import DueIndexing
from gateway.store.tasks.enqueue import Enqueuing
from gateway.store.tasks.enqueue_reply import Enqueued, Stored
from gateway.store.tasks.finish import Finishing
from gateway.store.tasks.finish_reply import Ended, Finished
from gateway.store.tasks.finish_words import Finish
from gateway.store.tasks.invokes import ChildWait, Invoking
from gateway.store.tasks.leases import LOG_LINES_KEPT, Claim, ClaimStatus, Fence, Heartbeat, Leasing
from gateway.store.tasks.reads import Reading
from gateway.store.tasks.recovery import Expired, Looked, Recovering
from gateway.store.tasks.waits import Touch, Wait, Waiting

__all__ = [
    "LOG_LINES_KEPT",
    "CallWait",
    "Cancel",
    "CancelResult",
    "ChildWait",
    "Claim",
    "ClaimOrder",
    "ClaimStatus",
    "ClaimedCall",
    "Ended",
    "Enqueued",
    "Expired",
    "Fence",
    "Finish",
    "Finished",
    "Heartbeat",
    "Looked",
    "Stored",
    "TaskStore",
    "Touch",
    "Wait",
]


class TaskStore(
    Enqueuing,
    Leasing,
    Finishing,
    Cancelling,
    Recovering,
    DueIndexing,
    Reading,
    Waiting,
    Invoking,
    Calling,
):
    """Atomic task state changes of every queue."""
