"""Operations: one declaration per API route, from which both the Starlette routes and the
OpenAPI document are made, so the two cannot disagree.

A handler receives a :class:`Call` (request, principal, validated body, services) and returns a
model (sent with the operation's status), a :class:`Reply`, or None (``204 No Content``).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.api.body import read_model
from gateway.auth import Access, Principal
from gateway.errors import FieldProblem, ValidationFailed
from gateway.services import Services
from gateway.store.failures import as_gateway_error
from sdk.wire import check_queue_name

Schema = dict[str, Any]
_ULID = re.compile(r"^[0-7][0-9A-HJKMNP-TV-Z]{25}$")


@dataclass(frozen=True, slots=True)
class Param:
    name: str
    location: Literal["path", "query", "header"]
    description: str
    schema: Schema = field(default_factory=lambda: {"type": "string"})
    required: bool = False


@dataclass(frozen=True, slots=True)
class Reply:
    model: BaseModel | None
    status: int = 200
    headers: dict[str, str] | None = None


@dataclass(frozen=True, slots=True)
class Call:
    request: Request
    services: Services
    principal: Principal | None
    body: Any
    resolved_queue: str | None

    def path(self, name: str) -> str:
        return str(self.request.path_params[name])

    @property
    def queue(self) -> str:
        """The queue of the route, or of the task for task routes."""
        assert self.resolved_queue is not None
        return self.resolved_queue

    @property
    def task_id(self) -> str:
        return self.path("task_id").upper()

    def query(self, name: str) -> str | None:
        return self.request.query_params.get(name)

    def query_float(self, name: str, low: float, high: float) -> float | None:
        raw = self.query(name)
        if raw is None:
            return None
        try:
            value = float(raw)
        except ValueError:
            value = float("nan")
        if not low <= value <= high:
            raise ValidationFailed([FieldProblem(name, f"must be a number from {low} to {high}")])
        return value

    def query_bool(self, name: str) -> bool:
        raw = (self.query(name) or "false").lower()
        if raw not in ("true", "false", "1", "0"):
            raise ValidationFailed([FieldProblem(name, "must be true or false")])
        return raw in ("true", "1")


Handler = Callable[[Call], Awaitable[BaseModel | Reply | None]]


@dataclass(frozen=True, slots=True)
class Operation:
    method: str
    path: str
    summary: str
    tag: str
    access: Access
    handler: Handler
    body: type[BaseModel] | None = None
    response: type[BaseModel] | None = None
    status: int = 200
    params: tuple[Param, ...] = ()
    errors: tuple[int, ...] = ()
    description: str = ""

    @property
    def operation_id(self) -> str:
        return self.handler.__name__.removeprefix("_")


QUEUE = Param(
    "queue",
    "path",
    "Queue name.",
    {"type": "string", "pattern": r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"},
    True,
)
TASK_ID = Param("task_id", "path", "Task id (a ULID).", {"type": "string"}, True)


def _path_problem(name: str, reason: str) -> ValidationFailed:
    return ValidationFailed([FieldProblem(name, reason)])


async def _resolve_queue(request: Request, services: Services) -> str | None:
    """The queue a request is about: from the path, or the task's own for task routes."""
    params = request.path_params
    if "task_id" in params and _ULID.match(params["task_id"].upper()) is None:
        raise _path_problem("task_id", "must be a ULID: 26 Crockford base32 characters")
    if "queue" in params:
        try:
            return check_queue_name(params["queue"])
        except ValueError as e:
            raise _path_problem("queue", str(e)) from e
    if "task_id" in params:
        return await services.tasks.locate(params["task_id"].upper())
    return None


def _respond(op: Operation, result: BaseModel | Reply | None) -> Response:
    if isinstance(result, BaseModel):
        result = Reply(result, op.status)
    if result is None or result.model is None:
        return Response(
            status_code=204 if result is None else result.status,
            headers=result.headers if result else None,
        )
    return Response(
        result.model.model_dump_json(),
        status_code=result.status,
        media_type="application/json",
        headers=result.headers,
    )


def _endpoint(op: Operation) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        services: Services = request.state.services
        try:
            principal = None
            if op.access is not Access.LEASE:
                principal = services.auth.authenticate(request.headers.get("authorization"))
            queue = await _resolve_queue(request, services)
            if principal is not None:
                principal.require(op.access, queue)
            body = None
            if op.body is not None:
                body = await read_model(request, op.body, services.max_body_bytes)
            call = Call(request, services, principal, body, queue)
            return _respond(op, await op.handler(call))
        except Exception as e:
            known = as_gateway_error(e)
            if known is not None:
                raise known from e
            raise

    endpoint.__name__ = op.operation_id
    return endpoint


def routes(operations: Sequence[Operation]) -> list[Route]:
    return [Route(op.path, _endpoint(op), methods=[op.method]) for op in operations]
