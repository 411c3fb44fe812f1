"""Reading a JSON request body: size limit first, then parse, then validate.

Everything that comes from a request is validated in pydantic's strict mode, from JSON, so the
gateway accepts exactly what ``openapi.yaml`` describes: ``true`` is not 1, ``"5"`` is not 5, a
number is not a date-time. JSON has no NaN or Infinity, so a body that spells them is not JSON.
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

import orjson
from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic_core import from_json
from starlette.requests import Request

from gateway.core.errors import (
    FieldProblem,
    InvalidRequest,
    PayloadTooLarge,
    UnsupportedMediaType,
    ValidationFailed,
)
from sdk.wire.base import FINITE_JSON, reason

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")
_CONSTANTS = (b"NaN", b"Infinity")


TAG = "kind"
"""The field that tells the members of a union apart in the API's JSON (a job's ``schedule``)."""


def field_path(loc: tuple[int | str, ...], document: Any) -> str:
    """Where in ``document`` an error at pydantic's ``loc`` is, as the field's dotted JSON path.

    pydantic puts the tag of a discriminated union's member into ``loc`` (``schedule.crontab.
    timezone``, ``schedule.interval``); the JSON has no such level, so the tag is left out
    (``schedule.timezone``, ``schedule``): every field is named by where it is in the body.
    """
    parts = []
    node = document
    for part in loc:
        if isinstance(node, dict) and part not in node and node.get(TAG) == part:
            continue  # the union's tag, not a field
        parts.append(str(part))
        if isinstance(node, dict):
            node = node.get(part)
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
        else:
            node = None
    return ".".join(parts)


def field_problems(error: ValidationError, document: Any, prefix: str = "") -> list[FieldProblem]:
    """A problem per error, naming its field by its path in ``document`` (what was validated)."""
    problems = []
    for e in error.errors(include_url=False):
        path = field_path(e["loc"], document)
        problems.append(
            FieldProblem(prefix + path if path else prefix.rstrip(".") or "body", reason(e))
        )
    return problems


async def read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise PayloadTooLarge(f"the body is {declared} bytes; the limit is {limit}")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise PayloadTooLarge(f"the body is over the limit of {limit} bytes")
    return bytes(body)


def refuse_constants(body: bytes) -> None:
    """400 when the body uses NaN, Infinity or -Infinity, which JSON (RFC 8259) does not have.

    pydantic's parser accepts them; a JSON value (a payload) would keep them and they would be
    stored as null. Only a body with such a word in it is parsed a second time to find out.
    """
    if not any(word in body for word in _CONSTANTS):
        return
    try:
        from_json(body, allow_inf_nan=False)
    except ValueError as e:
        raise InvalidRequest(f"the body is not valid JSON: {e}") from e


def _finite_json(body: bytes) -> bool:
    """Whether ``body`` is JSON whose numbers are all finite: orjson refuses NaN, Infinity and
    numbers too large for a double, and reads a body in a tenth of the time ``json.dumps``
    takes to check each JSON value of it again (every task of a batch has a payload)."""
    try:
        orjson.loads(body)
    except orjson.JSONDecodeError:
        return False
    return True


def parse_model(model: type[M], body: bytes) -> M:
    """``body`` as a ``model``, strictly: 400 when it is not JSON, 422 naming each bad field.

    Unknown fields are refused at every depth, whatever a model's own configuration says
    (``extra="forbid"`` for the whole validation: sdk/wire/base.py).

    A body orjson reads is validated with the context :data:`~sdk.wire.base.FINITE_JSON`, so
    its JSON values skip their own check; any other body goes the whole way, so its answer is
    the same as ever."""
    finite = _finite_json(body)
    if not finite:
        refuse_constants(body)
    try:
        return model.model_validate_json(
            body, strict=True, extra="forbid", context=FINITE_JSON if finite else None
        )
    except ValidationError as e:
        if any(err["type"] == "json_invalid" for err in e.errors()):
            raise InvalidRequest(f"the body is not valid JSON: {e.errors()[0]['msg']}") from e
        raise ValidationFailed(field_problems(e, from_json(body))) from e


def parse_value(adapter: TypeAdapter[T], name: str, value: Any) -> T:
    """A query or path parameter, already turned into its JSON value, checked as strictly as a
    body field (422 naming ``name``)."""
    try:
        return adapter.validate_json(json.dumps(value), strict=True)
    except ValidationError as e:
        raise ValidationFailed(field_problems(e, value, f"{name}.")) from e


async def read_model(request: Request, model: type[M], limit: int) -> tuple[M, bytes]:
    """The validated body, and the bytes it came from (what an Idempotency-Key fingerprints)."""
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type not in ("application/json", ""):
        raise UnsupportedMediaType(
            f"send JSON with 'Content-Type: application/json', not '{media_type}'"
        )
    body = await read_body(request, limit)
    if not body.strip():
        raise InvalidRequest("the request needs a JSON body")
    return parse_model(model, body), body
