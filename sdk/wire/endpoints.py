"""A queue's endpoints: registration, secret rotation, and what the gateway reports of them."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import ConfigDict, Field

from sdk.wire.base import Capability, InputModel, OutputModel, WebUrl
from sdk.wire.catalog import CatalogTasks


class EndpointCreate(InputModel):
    """Body of ``POST /v1/queues/{queue}/endpoints``: a push endpoint (``url``, which the
    gateway POSTs tasks to) or a pull one (``pull: true``, no ``url``: its workers lease tasks
    with ``POST /v1/queues/{queue}/leases``)."""

    model_config = ConfigDict(
        json_schema_extra={  # a url, or pull: true and no url (a null url is no url)
            "allOf": [
                {
                    "not": {
                        "required": ["pull", "url"],
                        "properties": {"pull": {"enum": [True]}, "url": {"type": "string"}},
                    }
                },
                {
                    "anyOf": [
                        {"required": ["url"], "properties": {"url": {"type": "string"}}},
                        {"required": ["pull"], "properties": {"pull": {"enum": [True]}}},
                    ]
                },
            ]
        }
    )

    url: WebUrl | None = Field(
        None, description="Where tasks are pushed. Required unless pull; forbidden if pull."
    )
    pull: bool = Field(
        False,
        description="A pull endpoint: workers lease its tasks (POST .../leases) instead of "
        "receiving pushes. Its concurrency bounds the tasks leased to it at once.",
    )
    concurrency: int = Field(10, ge=1, le=10_000, description="Tasks in flight at once.")
    capabilities: list[Capability] = Field(default_factory=list, max_length=32)
    batch_size: int = Field(
        1,
        ge=1,
        le=500,
        description="Most tasks one push carries. Above 1 the endpoint receives every push as "
        "a PushBatch and answers a BatchAnswer.",
    )
    tasks: CatalogTasks | None = Field(
        None,
        description="The task names it serves, each with its payload's JSON Schema (the task "
        "catalog); enqueues of these names are checked against it. Report a new list later "
        "with PUT /v1/queues/{queue}/endpoints/{endpoint_id}/tasks.",
    )


class CircuitState(StrEnum):
    CLOSED = "closed"  # pushes flow
    OPEN = "open"  # failing: no pushes until open_until
    HALF_OPEN = "half_open"  # one probe push is out; its answer closes or reopens the circuit


class Endpoint(OutputModel):
    id: str
    queue: str
    url: str | None = Field(None, description="Where tasks are pushed; null for a pull endpoint.")
    pull: bool = False
    concurrency: int
    capabilities: list[str]
    batch_size: int = 1
    enabled: bool
    disabled_reason: str | None = None
    created_at: datetime
    in_flight: int = 0
    circuit: CircuitState = CircuitState.CLOSED
    failures: int = Field(
        0,
        description="Failed attempts in a row, as the circuit breaker counts them: only what "
        "the gateway observed from the endpoint (an error answer, a push timeout or connection "
        "failure, an accepted task whose lease ran out), never a lease that ran out unanswered.",
    )
    open_until: datetime | None = Field(
        None, description="While the circuit is open: when the next probe may go."
    )
    previous_secret_until: datetime | None = Field(
        None,
        description="After a secret rotation: until when pushes are also signed with the "
        "previous secret. Null when only the current secret is sent.",
    )
    latency_ms: float | None = Field(
        None,
        description="Recent answer time to a push, in ms: a moving average that takes a slower "
        "answer (or a push timeout) at once and fades toward 0 while no push is answered. "
        "Null until the endpoint answered once.",
    )
    error_rate: float = Field(
        0.0,
        description="Share of its recent attempts that failed or were refused as busy (0 to 1), "
        "fading toward 0 while nothing new is observed. The dispatcher weighs it, the latency "
        "and the pushes in flight to choose an endpoint.",
    )


class SecretRotation(InputModel):
    """Body of ``POST /v1/queues/{queue}/endpoints/{endpoint_id}/secret``."""

    overlap: float = Field(
        86_400,
        ge=0,
        le=30 * 86_400,
        description="Seconds during which pushes are signed with both the new and the previous "
        "secret (Standard Webhooks allows several signatures), so workers can be given the new "
        "one without refusing pushes meanwhile: a push claimed before the overlap's end "
        "(previous_secret_until, to the millisecond) carries both, one claimed after it only "
        "the new one. 0 stops the previous one at once: no push claimed after the rotation "
        "carries it.",
    )


class EndpointPatch(InputModel):
    """Body of ``PATCH /v1/queues/{queue}/endpoints/{endpoint_id}``."""

    enabled: bool = Field(
        description="false: the endpoint gets no more tasks (pushes in flight finish "
        "normally, a pull endpoint's workers lease none); true: it gets them again, and the "
        "reason it was disabled for (e.g. an answer 410 Gone) is cleared."
    )


class EndpointCreated(Endpoint):
    """Returned once, at registration (or rotation): the only time the signing secret is
    shown."""

    secret: str = Field(description="Standard Webhooks signing secret, 'whsec_…'.")


class EndpointList(OutputModel):
    items: list[Endpoint]
