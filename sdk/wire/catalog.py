"""The task catalog: the task names an endpoint serves, each with a JSON Schema of its payload.

An endpoint reports its tasks when it is registered (``tasks`` in ``EndpointCreate``) and may
report them again at any time (``PUT /v1/queues/{queue}/endpoints/{endpoint_id}/tasks``, which
replaces its list). ``GET /v1/tasks`` lists what every queue's endpoints serve. Enqueues of a
cataloged name are checked against its schema (422 naming the field, e.g.
``payload.kwargs.width``); names nobody reported are not checked.

``schema`` describes the task's whole ``payload``. For SDK workers that is the ``{"args": [...],
"kwargs": {...}}`` convention (:class:`~sdk.wire.tasks.TaskArgs`), and the SDK derives the
schema from the function's type hints (``sdk.catalog``); other workers may describe any payload.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated, Any

from pydantic import AfterValidator, ConfigDict, Field

from sdk.wire.base import InputModel, Json, OutputModel, TaskName

MAX_SCHEMA_BYTES = 64 * 1024
"""Largest schema of one task, as compact JSON."""
MAX_CATALOG_TASKS = 500
"""Most task names one endpoint may report."""


def _bounded(schema: dict[str, Any]) -> dict[str, Any]:
    size = len(json.dumps(schema, separators=(",", ":")))
    if size > MAX_SCHEMA_BYTES:
        raise ValueError(f"is {size} bytes as JSON; the limit is {MAX_SCHEMA_BYTES}")
    return schema


PayloadSchema = Annotated[dict[str, Json], AfterValidator(_bounded)]
"""A JSON Schema (an object; draft 2020-12 unless ``$schema`` names another) of 64 KiB at most."""


class CatalogTask(InputModel):
    """One task an endpoint serves: its name and the JSON Schema its payload must fit."""

    model_config = ConfigDict(serialize_by_alias=True)

    name: TaskName
    payload_schema: PayloadSchema = Field(
        alias="schema",
        description="JSON Schema of the task's payload (draft 2020-12 unless $schema says "
        "otherwise; at most 64 KiB; $ref only within the schema). SDK workers describe "
        '{"args": [...], "kwargs": {...}}, derived from the function\'s type hints.',
    )
    description: str | None = Field(None, max_length=2000)


CatalogTasks = Annotated[
    list[CatalogTask],
    Field(
        max_length=MAX_CATALOG_TASKS,
        # Unique by name is a rule JSON Schema cannot state (uniqueItems compares whole
        # entries): the gateway answers a repeated name with its own 409, which openapi.yaml
        # declares, rather than a 422 for a body the schema admits.
        description="At most 500 tasks, each task name at most once: a name listed twice "
        "(alike or not) is refused with 409, problem type "
        "'tag:jobgate.dev,2026:problem/duplicate-task-name', naming both places.",
    ),
]


class EndpointTasks(InputModel):
    """Body of ``PUT /v1/queues/{queue}/endpoints/{endpoint_id}/tasks``: the endpoint's whole
    task list, replacing the one it reported before (an empty list withdraws them all)."""

    tasks: CatalogTasks


class EndpointCatalog(OutputModel):
    """The tasks one endpoint reported."""

    queue: str
    endpoint_id: str
    tasks: list[CatalogTask]
    updated_at: datetime | None = Field(None, description="When the list was last reported.")


class CatalogEndpoint(OutputModel):
    id: str
    url: str | None = None  # None for a pull endpoint
    enabled: bool


class CatalogEntry(OutputModel):
    """One task name of one queue, as its endpoints reported it."""

    model_config = ConfigDict(serialize_by_alias=True)

    queue: str
    name: str
    payload_schema: dict[str, Any] = Field(
        alias="schema",
        description="What enqueues are checked against: the schema reported most recently by "
        "an endpoint serving the name.",
    )
    description: str | None = None
    endpoints: list[CatalogEndpoint] = Field(description="Every endpoint that reported it.")
    served: bool = Field(description="Some enabled endpoint serves it.")
    schemas_differ: bool = Field(
        False, description="Its endpoints reported different schemas (e.g. during a deploy)."
    )
    updated_at: datetime


class CatalogPage(OutputModel):
    items: list[CatalogEntry]
    next_cursor: str | None = None
