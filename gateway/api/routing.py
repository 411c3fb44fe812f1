"""Operations: one declaration per API route, from which both the Starlette routes and the
OpenAPI document are made, so the two cannot disagree.

A handler receives a :class:`Call` (request, principal, validated body, services) and returns a
model (sent with the operation's status), a :class:`Reply`, or None (``204 No Content``).
Every POST but the worker callbacks honours an ``Idempotency-Key`` (``gateway.api.idempotency``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, TypeAdapter
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.api import idempotency
from gateway.api.body import parse_value, read_model
from gateway.api.problems import answered_inside, known_error
from gateway.core.errors import GatewayError
from gateway.security.auth import Access, Principal
from gateway.services import Services
from gateway.store.failures import as_gateway_error
from sdk.wire import QueueName, TaskId

Schema = dict[str, Any]
CALLBACKS = "/v1/callbacks/"  # worker callbacks: fenced by lease tokens, not Idempotency-Keys


_UNSEEN = object()
PARSED_KEPT = 1024
"""Values each parameter keeps parsed, by their text: a queue's name comes with every request
about it (its parse took pydantic about 4 µs, a fiftieth of a single enqueue's CPU); task ids,
each seen once or twice, fill it once and then go unkept."""
_NUMBER = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")


@dataclass(frozen=True)
class Param:
    """A path, query or header parameter. Its type is both what ``openapi.yaml`` shows and what
    the request is checked against, so the two cannot disagree."""

    name: str
    location: Literal["path", "query", "header"]
    description: str
    annotation: Any = str
    required: bool = False
    default: Any = None
    adapter: TypeAdapter[Any] = field(init=False, repr=False, compare=False)
    _kind: object = field(init=False, repr=False, compare=False)
    _parsed: dict[str, Any] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "adapter", TypeAdapter(self.annotation))
        object.__setattr__(self, "_parsed", {})
        # Building a JSON Schema takes pydantic a few hundred µs: once here, not per request.
        object.__setattr__(self, "_kind", self.schema.get("type"))

    @property
    def schema(self) -> Schema:
        schema = self.adapter.json_schema(mode="validation")
        schema.pop("title", None)
        if self.default is not None:
            schema["default"] = self.adapter.dump_python(self.default, mode="json")
        return schema

    def parse(self, raw: str | None) -> Any:
        """The parameter's value (its default when absent), or 422 naming it."""
        if raw is None:
            return self.default
        found = self._parsed.get(raw, _UNSEEN)
        if found is not _UNSEEN:
            return found
        value = parse_value(self.adapter, self.name, _json_value(raw, self._kind))
        if len(self._parsed) < PARSED_KEPT and isinstance(value, str | int | float):
            self._parsed[raw] = value  # immutable: the same answer for the same text
        return value


def _json_value(raw: str, kind: object) -> Any:
    """A query string value as the JSON value it spells for a parameter of type ``kind``:
    numbers and booleans as JSON writes them, anything else stays a string (and fails)."""
    if kind in ("integer", "number") and _NUMBER.fullmatch(raw):
        number = json.loads(raw)
        if kind == "integer" and isinstance(number, float) and number.is_integer():
            return int(number)  # JSON Schema counts 10.0 as an integer
        return number
    if kind == "boolean" and raw in ("true", "false"):
        return raw == "true"
    return raw


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

    def param(self, param: Param) -> Any:
        """The value of a query or header parameter, checked against its declared type."""
        if param.location == "query" and not self.request.scope["query_string"]:
            return param.default  # what parse(None) gives, without parsing an empty query
        source = self.request.query_params if param.location == "query" else self.request.headers
        return param.parse(source.get(param.name))


Handler = Callable[[Call], Awaitable[BaseModel | Reply | Response | None]]


@dataclass(frozen=True, slots=True)
class Link:
    """An OpenAPI link from an operation's answer to the next call (for generated clients and
    stateful testing): ``parameters`` maps the target's parameters to runtime expressions such
    as ``$response.body#/id`` or ``$request.path.queue``."""

    name: str
    operation_id: str
    parameters: dict[str, str]


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
    # Errors of their own problem type (not about:blank) the operation may answer, which
    # openapi.yaml names under their status.
    problems: tuple[type[GatewayError], ...] = ()
    description: str = ""
    also: tuple[int, ...] = ()  # other success statuses, with the same response
    stream: str | None = None  # another media type of the answer, streamed when Accept asks
    text: str | None = None  # the answer is this media type (a string), not JSON
    links: tuple[Link, ...] = ()
    # The answer under 'Prefer: return=minimal' (gateway/api/prefer.py), if the operation
    # honours it: openapi.yaml shows either shape.
    minimal: type[BaseModel] | None = None

    @property
    def operation_id(self) -> str:
        return self.handler.__name__.removeprefix("_")

    @property
    def idempotent(self) -> bool:
        """Whether an Idempotency-Key makes it run once: every POST but worker callbacks
        (fenced by their lease token)."""
        return self.method == "POST" and not self.path.startswith(CALLBACKS)


QUEUE = Param("queue", "path", "Queue name.", QueueName, True)
TASK_ID = Param("task_id", "path", "Task id (a ULID, any case).", TaskId, True)
IDEMPOTENCY_KEY = Param(
    idempotency.HEADER,
    "header",
    "Makes a retry safe: a repeat with this key and the same body gets the first answer again "
    f"(201 as 200, with '{idempotency.REPLAYED}: true') instead of running twice, for 24 h by "
    "default; the key with another body is refused (409, problem type idempotency-key-reused), "
    "a repeat while the first still runs "
    "gets 409. Error answers are not kept. Scoped to the API key and the path.",
    idempotency.Key,
)


async def _resolve_queue(request: Request, services: Services) -> str | None:
    """The queue a request is about: from the path, or the task's own for task routes."""
    params = request.path_params
    task_id = TASK_ID.parse(params["task_id"]) if "task_id" in params else None
    if "queue" in params:
        return str(QUEUE.parse(params["queue"]))
    if task_id is not None:
        return await services.tasks.locate(task_id)
    return None


def _respond(op: Operation, result: BaseModel | Reply | Response | None) -> Response:
    if isinstance(result, Response):  # made by the handler: a stream
        return result
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


def endpoint(op: Operation) -> Callable[[Request], Awaitable[Response]]:
    """The Starlette endpoint of ``op``: authentication, the queue, the Idempotency-Key, the
    body, the handler, and its answer."""

    idempotent = op.idempotent

    async def answer(request: Request) -> Response:
        # The lifespan's state, read from the scope: request.state builds a State (and fails a
        # hasattr first) on every request.
        services: Services = request.scope["state"]["services"]
        try:
            principal = None
            if op.access not in (Access.LEASE, Access.PUBLIC):
                principal = services.auth.authenticate(request.headers.get("authorization"))
            queue = await _resolve_queue(request, services)
            if principal is not None:
                principal.require(op.access, queue)
            key = idempotency.requested_key(request) if idempotent else None
            body, raw = None, b""
            if op.body is not None:
                body, raw = await read_model(request, op.body, services.max_body_bytes)
            call = Call(request, services, principal, body, queue)

            async def run() -> Response:
                return _respond(op, await op.handler(call))

            if key is None:
                return await run()
            identity = principal.name if principal else None
            return await idempotency.run_once(
                request, services.idempotency, identity, key, raw, run
            )
        except Exception as e:
            known = as_gateway_error(e)
            if known is not None:
                raise known from e
            if answered_inside(e):
                raise
            # Answered 500 by the app, logged here with its traceback: not past the app, to
            # the server, which would close the client's connection (gateway.api.problems).
            raise known_error(request, e) from e

    answer.__name__ = op.operation_id
    return answer


def routes(operations: Sequence[Operation]) -> list[Route]:
    """One route per path, so a method the path lacks gets 405 with an ``Allow`` header that
    names every method it has (HEAD comes with GET)."""
    by_path: dict[str, dict[str, Callable[[Request], Awaitable[Response]]]] = {}
    for op in operations:
        by_path.setdefault(op.path, {})[op.method] = endpoint(op)
        if op.method == "GET":
            by_path[op.path]["HEAD"] = by_path[op.path]["GET"]
    return [Route(path, _by_method(table), methods=list(table)) for path, table in by_path.items()]


def _by_method(
    table: dict[str, Callable[[Request], Awaitable[Response]]],
) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        return await table[request.method](request)

    return endpoint
