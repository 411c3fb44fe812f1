"""Routes of the task catalog: what endpoints serve (``GET /v1/tasks``), and an endpoint
reporting its tasks again."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field

from gateway.api.queues import ENDPOINT_ID
from gateway.api.routing import QUEUE, Call, Operation, Param
from gateway.core.errors import DuplicateTaskName
from gateway.security.auth import Access
from gateway.services.catalog import MAX_LIMIT
from sdk.wire import CatalogPage, EndpointCatalog, EndpointTasks, QueueName, TaskName


async def list_catalog(call: Call) -> BaseModel:
    return await call.services.catalog.page(
        call.param(IN_QUEUE), call.param(NAME), call.param(CURSOR), call.param(LIMIT)
    )


async def put_endpoint_tasks(call: Call) -> BaseModel:
    return await call.services.catalog.put(call.queue, call.path("endpoint_id"), call.body)


IN_QUEUE = Param("queue", "query", "Only this queue's tasks.", QueueName)
NAME = Param("name", "query", "Only this task name.", TaskName)
LIMIT = Param(
    "limit", "query", "Page size.", Annotated[int, Field(ge=1, le=MAX_LIMIT)], default=100
)
CURSOR = Param(
    "cursor",
    "query",
    "The next_cursor of the previous page.",
    Annotated[str, Field(pattern=r"^[0-9]{1,9}$")],
)

OPERATIONS = [
    Operation(
        "GET",
        "/v1/tasks",
        "List the task catalog: every task name endpoints serve, with its payload schema",
        "catalog",
        Access.READ,
        list_catalog,
        response=CatalogPage,
        params=(IN_QUEUE, NAME, LIMIT, CURSOR),
        errors=(404,),
        description="By queue, then name. Each entry has the JSON Schema enqueues of the name "
        "are checked against (the one reported most recently by an enabled endpoint), the "
        "endpoints that reported it, and whether an enabled one serves it. 404 when the queue "
        "given is not registered. Single tasks are at /v1/tasks/{task_id}.",
    ),
    Operation(
        "PUT",
        "/v1/queues/{queue}/endpoints/{endpoint_id}/tasks",
        "Report the tasks an endpoint serves, replacing its earlier list",
        "endpoints",
        Access.ADMIN,
        put_endpoint_tasks,
        body=EndpointTasks,
        response=EndpointCatalog,
        params=(QUEUE, ENDPOINT_ID),
        errors=(404,),
        problems=(DuplicateTaskName,),
        description="What a worker calls when it starts with new code: the endpoint keeps its "
        "id, secret and health. An empty list withdraws every name. A schema that is not a "
        "usable JSON Schema (draft 2020-12 unless $schema says otherwise; $ref only within "
        "the schema) is refused (422 naming it); a task name listed twice, with 409.",
    ),
]
