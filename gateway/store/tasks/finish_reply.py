"""What the finish script answered, as Python values: the last step of
:meth:`gateway.store.tasks.finish.Finishing.finish_many` and ``finish_batch``. Each end's entry
becomes a :class:`Finished`; the markers after them (``READY``, ``NOTICE``) say whether ready
tasks wait for the room freed and who heard so (:func:`read_markers`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gateway.store.scripts import Reply
from gateway.store.tasks.leases import Fence
from sdk.wire import TaskState


@dataclass(slots=True)
class Finished:
    """What the finish script did with one attempt's end. When the fence held (``OK``) it also
    says, for metrics, which task it was (``name``, ``version``), when the attempt started and
    the task was created, and how its endpoint's circuit changed (``'open'``, ``'closed'``).
    Never changed once made, but not ``frozen``, as :class:`Finish` (one per task ended)."""

    fence: Fence
    state: TaskState | None = None
    due_ms: int | None = None
    name: str = ""
    version: str = ""
    started_ms: int = 0
    created_ms: int = 0
    circuit: str = ""
    endpoint_id: str = ""


@dataclass(frozen=True, slots=True)
class Ended:
    """What one finish call did: each end (:class:`Finished`, in order), whether ready tasks
    wait for room it freed (``ready``: a claim now may take some; otherwise none of these ends
    gives a claim anything new), and then whether no other gateway heard so (``alone``: at most
    one subscriber of the wake channel, this gateway's own; never said on a Redis Cluster,
    whose PUBLISH counts the subscribers of one node only), or whether another gateway surely
    heard (``shared``: two subscribers or more heard, so at least one was not this gateway;
    said on a cluster too, where the count is a lower bound)."""

    done: list[Finished]
    ready: bool = False
    alone: bool = False
    shared: bool = False


# Lookups by value rather than the enums' calls (each end of a finish reads both).
_FENCES: dict[str, Fence] = {fence.value: fence for fence in Fence}
_STATES: dict[str, TaskState] = {state.value: state for state in TaskState}


def read_finished(reply: list[Any]) -> Finished:
    """One end's entry of the reply (lua/finish.lua's header)."""
    fence = _FENCES.get(reply[0]) or Fence(reply[0])
    if fence is Fence.OK:
        return Finished(  # positional, in the fields' order (keywords cost more)
            fence,
            _STATES.get(reply[1]) or TaskState(reply[1]),
            int(reply[2]) if reply[2] else None,  # due_ms
            reply[3],  # name
            reply[4],  # version
            int(reply[5]),  # started_ms
            int(reply[6]),  # created_ms
            reply[7],  # circuit
            reply[8],  # endpoint_id
        )
    if fence is Fence.STALE:
        return Finished(fence, TaskState(reply[1]))
    return Finished(fence)


def read_markers(replies: Reply, ends: int) -> tuple[bool, int, bool]:
    """Take the markers off the end of ``replies`` (which then holds the ``ends`` entries
    alone) and read them: whether ready tasks wait for the room freed (``READY``), how many
    subscribers of the wake channel heard so (0 when none wait), and whether a completion
    callback notice was recorded (``NOTICE``)."""
    ready = noticed = False
    heard = 0
    while len(replies) > ends:  # markers after the ends
        marker = replies.pop()
        if marker[0] == "NOTICE":
            noticed = True
        elif marker[0] == "READY":
            ready = True
            heard = int(marker[1])
    return ready, heard, noticed
