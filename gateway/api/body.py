"""Reading a JSON request body: size limit first, then parse, then validate."""

from __future__ import annotations

from typing import TypeVar

from pydantic import BaseModel, ValidationError
from starlette.requests import Request

from gateway.errors import (
    FieldProblem,
    InvalidRequest,
    PayloadTooLarge,
    UnsupportedMediaType,
    ValidationFailed,
)

M = TypeVar("M", bound=BaseModel)


def field_problems(error: ValidationError, prefix: str = "") -> list[FieldProblem]:
    problems = []
    for e in error.errors(include_url=False):
        path = ".".join(str(part) for part in e["loc"])
        problems.append(
            FieldProblem(prefix + path if path else prefix.rstrip(".") or "body", e["msg"])
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
    try:
        return model.model_validate_json(body), body
    except ValidationError as e:
        if any(err["type"] == "json_invalid" for err in e.errors()):
            raise InvalidRequest(f"the body is not valid JSON: {e.errors()[0]['msg']}") from e
        raise ValidationFailed(field_problems(e)) from e
