"""Routes for queues and their worker endpoints (admin scope to change, read to list)."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field

from gateway.api.routing import QUEUE, Call, Link, Operation, Param, Reply
from gateway.core.errors import DuplicateTaskName
from gateway.security.auth import Access
from sdk.wire import (
    Endpoint,
    EndpointCreate,
    EndpointCreated,
    EndpointList,
    EndpointPatch,
    Queue,
    QueueList,
    QueueName,
    QueuePolicy,
    QueuePolicyPatch,
    SecretRotation,
)


async def put_queue(call: Call) -> Reply:
    queue, created = await call.services.queues.put(call.queue, call.body)
    return Reply(queue, 201 if created else 200)


async def patch_queue(call: Call) -> BaseModel:
    return await call.services.queues.patch(call.queue, call.body)


async def get_queue(call: Call) -> BaseModel:
    return await call.services.queues.get(call.queue)


async def list_queues(call: Call) -> BaseModel:
    return await call.services.queues.list(limit=call.param(PAGE), after=call.param(AFTER))


async def delete_queue(call: Call) -> None:
    await call.services.queues.delete(call.queue, force=call.param(FORCE))


async def add_endpoint(call: Call) -> BaseModel:
    return await call.services.queues.add_endpoint(call.queue, call.body)


async def list_endpoints(call: Call) -> BaseModel:
    return await call.services.queues.endpoints(call.queue)


async def rotate_secret(call: Call) -> BaseModel:
    return await call.services.queues.rotate_secret(call.queue, call.path("endpoint_id"), call.body)


async def patch_endpoint(call: Call) -> BaseModel:
    return await call.services.queues.set_enabled(call.queue, call.path("endpoint_id"), call.body)


async def delete_endpoint(call: Call) -> None:
    await call.services.queues.delete_endpoint(call.queue, call.path("endpoint_id"))


MAX_QUEUE_PAGE = 500
PAGE = Param(
    "limit", "query", "Page size.", Annotated[int, Field(ge=1, le=MAX_QUEUE_PAGE)], default=100
)
AFTER = Param("cursor", "query", "The next_cursor of the previous page.", QueueName)
ENDPOINT_ID = Param("endpoint_id", "path", "Endpoint id.", required=True)
FORCE = Param(
    "force", "query", "Delete even with unfinished tasks (they are lost).", bool, default=False
)

OPERATIONS = [
    Operation(
        "GET",
        "/v1/queues",
        "List queues",
        "queues",
        Access.READ,
        list_queues,
        response=QueueList,
        params=(PAGE, AFTER),
        description="A page of queues in name order, each with its policy and task counts.",
    ),
    Operation(
        "PUT",
        "/v1/queues/{queue}",
        "Register a queue or replace its policy",
        "queues",
        Access.ADMIN,
        put_queue,
        body=QueuePolicy,
        response=Queue,
        status=201,
        also=(200,),
        params=(QUEUE,),
        description="201 when the queue is new, 200 when its policy was replaced.",
        links=tuple(
            Link(name, target, {"queue": "$request.path.queue"})
            for name, target in (
                ("GetQueue", "get_queue"),
                ("AddEndpoint", "add_endpoint"),
                ("ListEndpoints", "list_endpoints"),
                ("EnqueueTask", "enqueue"),
                ("ListTasks", "list_tasks"),
            )
        ),
    ),
    Operation(
        "PATCH",
        "/v1/queues/{queue}",
        "Change some fields of a queue's policy",
        "queues",
        Access.ADMIN,
        patch_queue,
        body=QueuePolicyPatch,
        response=Queue,
        params=(QUEUE,),
        errors=(404,),
    ),
    Operation(
        "GET",
        "/v1/queues/{queue}",
        "Get a queue with its task counts",
        "queues",
        Access.READ,
        get_queue,
        response=Queue,
        params=(QUEUE,),
        errors=(404,),
    ),
    Operation(
        "DELETE",
        "/v1/queues/{queue}",
        "Delete a queue and its tasks",
        "queues",
        Access.ADMIN,
        delete_queue,
        status=204,
        params=(QUEUE, FORCE),
        errors=(404, 409),
    ),
    Operation(
        "POST",
        "/v1/queues/{queue}/endpoints",
        "Register a worker endpoint (its signing secret is shown once)",
        "endpoints",
        Access.ADMIN,
        add_endpoint,
        body=EndpointCreate,
        response=EndpointCreated,
        status=201,
        params=(QUEUE,),
        errors=(404,),
        problems=(DuplicateTaskName,),
        links=(
            Link(
                "DeleteEndpoint",
                "delete_endpoint",
                {"queue": "$request.path.queue", "endpoint_id": "$response.body#/id"},
            ),
        ),
    ),
    Operation(
        "GET",
        "/v1/queues/{queue}/endpoints",
        "List a queue's endpoints",
        "endpoints",
        Access.READ,
        list_endpoints,
        response=EndpointList,
        params=(QUEUE,),
        errors=(404,),
    ),
    Operation(
        "POST",
        "/v1/queues/{queue}/endpoints/{endpoint_id}/secret",
        "Rotate an endpoint's signing secret (the new one is shown once)",
        "endpoints",
        Access.ADMIN,
        rotate_secret,
        body=SecretRotation,
        response=EndpointCreated,
        params=(QUEUE, ENDPOINT_ID),
        errors=(404,),
        description="Pushes are signed with the new secret and, for `overlap` seconds, with the "
        "previous one too (two signatures in webhook-signature), so a worker still holding the "
        "previous secret keeps accepting them while it is given the new one; the SDK Worker "
        "accepts several secrets (Worker(secret=[new, previous])). A second rotation within the "
        "window drops the oldest secret at once.",
    ),
    Operation(
        "PATCH",
        "/v1/queues/{queue}/endpoints/{endpoint_id}",
        "Enable or disable an endpoint",
        "endpoints",
        Access.ADMIN,
        patch_endpoint,
        body=EndpointPatch,
        response=Endpoint,
        params=(QUEUE, ENDPOINT_ID),
        errors=(404,),
        description="A disabled endpoint gets no new tasks (pushes in flight finish normally; "
        "a pull endpoint's workers lease none) until it is enabled again. An endpoint that "
        "answered 410 Gone was disabled by the gateway: enabling it clears that reason.",
    ),
    Operation(
        "DELETE",
        "/v1/queues/{queue}/endpoints/{endpoint_id}",
        "Remove an endpoint (pushes in flight finish normally)",
        "endpoints",
        Access.ADMIN,
        delete_endpoint,
        status=204,
        params=(QUEUE, ENDPOINT_ID),
        errors=(404,),
    ),
]
