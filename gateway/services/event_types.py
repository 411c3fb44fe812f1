"""What an accepted event is, and what it did: the names the events service and its consumers
(triggers, waits, cancel_on) share.

The events service (``POST /v1/events``) records an event, then hands it to each
:class:`EventConsumer` it was given, in order; the recoverer hands it again to every consumer
when the gateway that accepted it died before it was done. So a consumer is idempotent: a second
call for one event changes nothing, and reports what the first did as far as it can tell.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from pydantic import JsonValue

TouchKind = Literal["started", "resumed", "cancelled", "cancel_requested"]


@dataclass(frozen=True, slots=True)
class AcceptedEvent:
    """An event the gateway accepted: its id (the producer's, or a ULID), name, data (a JSON
    object) and when it was accepted (ms, the gateway's clock: Redis's)."""

    id: str
    name: str
    data: dict[str, JsonValue]
    accepted_ms: int


@dataclass(frozen=True, slots=True)
class Touched:
    """What an event did to one task: ``started`` it (a trigger's task), ``resumed`` its wait,
    ``cancelled`` it or ``cancel_requested`` (its ``cancel_on``). ``by`` names the trigger, the
    wait's step, or ``cancel_on``."""

    queue: str
    task_id: str
    what: TouchKind
    by: str


class EventConsumer(Protocol):
    async def consume(self, event: AcceptedEvent) -> list[Touched]:
        """Act on ``event``; idempotent (see the module's docstring)."""
        ...


class RecentEvents(Protocol):
    async def since(self, name: str, after_ms: int, offset: int = 0) -> list[AcceptedEvent]:
        """Events named ``name`` accepted at or after ``after_ms``, oldest first, from the
        ``offset``-th on: one page (empty past the last)."""
        ...
