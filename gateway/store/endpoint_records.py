"""Endpoints and queues as the store keeps them: an endpoint's record (the queue's ``endpoints``
hash, which the claim script reads), its health (the ``health`` hash), and a queue's stored
settings; each as the wire's models."""

from __future__ import annotations

import math
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, field_validator

from gateway.store.records import to_datetime
from sdk.wire import CircuitState, Endpoint, QueuePolicy


class EndpointRecord(BaseModel):
    """An endpoint as stored in the queue's ``endpoints`` hash (the claim script reads it)."""

    model_config = ConfigDict(extra="ignore")

    id: str
    queue: str
    url: str = ""  # empty for a pull endpoint
    pull: bool = False  # its workers lease tasks (POST .../leases); the dispatcher skips it
    concurrency: int
    capabilities: list[str]
    secrets: list[str]  # the current one first; then the previous, while it is still sent
    previous_until_ms: int | None = None  # when the previous secret stops being sent
    batch_size: int = 1
    enabled: bool = True
    disabled_reason: str | None = None
    created_ms: int

    @field_validator("capabilities", mode="before")
    @classmethod
    def _lua_empty_table(cls, value: object) -> object:
        # Lua's cjson writes an empty list back as {}.
        return [] if value == {} else value

    def to_wire(
        self, in_flight: int = 0, health: EndpointHealth | None = None, now_ms: int = 0
    ) -> Endpoint:
        health = health or EndpointHealth()
        latency, errors = health.faded(now_ms)
        return Endpoint(
            id=self.id,
            queue=self.queue,
            url=self.url or None,
            pull=self.pull,
            concurrency=self.concurrency,
            capabilities=self.capabilities,
            batch_size=self.batch_size,
            enabled=self.enabled,
            disabled_reason=self.disabled_reason,
            created_at=to_datetime(self.created_ms),
            previous_secret_until=(
                to_datetime(self.previous_until_ms)
                if self.previous_until_ms and self.previous_until_ms > now_ms
                else None
            ),
            in_flight=in_flight,
            circuit=health.circuit,
            failures=health.fails,
            open_until=to_datetime(health.open_until) if health.open_until else None,
            latency_ms=None if latency is None else round(latency, 1),
            error_rate=round(errors, 4),
        )


HEALTH_FADE_MS = 30_000  # as in lua/health.lua


class EndpointHealth(BaseModel):
    """An endpoint's circuit breaker and recent figures, as the claim, accept and finish
    scripts keep them in the queue's ``health`` hash (``lua/health.lua`` says what each is)."""

    model_config = ConfigDict(extra="ignore")

    fails: int = 0  # observed failures in a row (the circuit breaker's count)
    open_until: int | None = None  # while the circuit is open: ms when a probe may go
    opens: int = 0
    probe: bool = False  # the half-open probe is out
    lat: float | None = None  # answer time, ms (peak-sensitive average)
    err: float = 0.0  # share of recent attempts that failed
    at: int | None = None  # ms of the last sample

    @property
    def circuit(self) -> CircuitState:
        if self.open_until is None:
            return CircuitState.CLOSED
        return CircuitState.HALF_OPEN if self.probe else CircuitState.OPEN

    def faded(self, now_ms: int) -> tuple[float | None, float]:
        """Answer time and error share as of ``now_ms``: both fade toward 0 without samples."""
        w = math.exp(-max(0, now_ms - (self.at or now_ms)) / HEALTH_FADE_MS)
        return (None if self.lat is None else self.lat * w), self.err * w


@dataclass(frozen=True, slots=True)
class ListedEndpoint:
    """An endpoint as the store lists it: its record, pushes in flight and health."""

    record: EndpointRecord
    in_flight: int
    health: EndpointHealth


@dataclass(frozen=True, slots=True)
class StoredQueue:
    name: str
    policy: QueuePolicy
    created_ms: int
