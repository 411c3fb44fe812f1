"""The OpenAPI 3.1 document, built from the operation table and the wire models.

``jobgate openapi`` prints it; the committed ``openapi.yaml`` must equal it (a test checks).
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

import yaml
from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema

from gateway.api import OPERATIONS
from gateway.api.idempotency import REPLAYED
from gateway.api.routing import IDEMPOTENCY_KEY, Operation, Param
from gateway.core.errors import GatewayError, IdempotencyKeyReused
from gateway.security.auth import Access
from sdk.wire import PROBLEM_CONTENT_TYPE, RETURN_MINIMAL, Problem

REF = "#/components/schemas/{model}"
ERROR_TEXT = {
    400: "Malformed request (not JSON, bad query parameter)",
    401: "No or unknown credentials",
    403: "The API key's scopes do not allow this",
    404: "Not found",
    409: "Conflict with the current state",
    413: "Body over the size limit",
    415: "Body is not JSON",
    422: "Fields that break the schema, each named",
    429: "A throttle dropped the enqueue and the task its window let through no longer exists",
    503: "Redis is out of memory or unreachable, or too few replicas confirmed an enqueue or "
    "a durable step (JOBGATE_WAIT_REPLICAS); retry after Retry-After",
}


Refs = dict[Any, dict[str, Any]]
REPLAYED_HEADER = {
    REPLAYED: {
        "description": "'true' when this is the kept answer to an earlier request with the same "
        "Idempotency-Key",
        "schema": {"type": "string", "enum": ["true"]},
    }
}
APPLIED_HEADER = {
    "Preference-Applied": {
        "description": "'return=minimal' when the body is the minimal answer the Prefer "
        "header asked for",
        "schema": {"type": "string", "enum": [RETURN_MINIMAL]},
    }
}


def _schemas() -> tuple[Refs, dict[str, Any]]:
    models: set[tuple[type[BaseModel], JsonSchemaMode]] = {(Problem, "serialization")}
    for op in OPERATIONS:
        if op.body is not None:
            models.add((op.body, "validation"))
        if op.response is not None:
            models.add((op.response, "serialization"))
        if op.minimal is not None:
            models.add((op.minimal, "serialization"))
    ordered = sorted(models, key=lambda m: (m[0].__name__, m[1]))
    refs, defs = models_json_schema(ordered, ref_template=REF)
    renamed = {key: _renamed(ref) for key, ref in refs.items()}
    schemas = {}
    for name, schema in defs.get("$defs", {}).items():
        schemas[_rename(name)] = _renamed(schema)
        if _rename(name) != name:  # titled as its model, a view would be a second class of
            schemas[_rename(name)]["title"] = _rename(name)  # that name to a generator
    return renamed, schemas


# pydantic names the two schemas of an input model that an answer holds too (a queue's
# policy) 'X-Input' and 'X-Output': they differ in additionalProperties (sdk/wire/base.py).
# The request's keeps the model's name, the answer's is its view (named so in its title too).
_MODE_NAMES = {"-Input": "", "-Output": "View"}
_PREFIX = REF.format(model="")


def _rename(name: str) -> str:
    for suffix, replacement in _MODE_NAMES.items():
        if name.endswith(suffix):
            return name.removesuffix(suffix) + replacement
    return name


def _renamed(node: Any) -> Any:
    """``node`` with every schema name, and every reference to one (a ``$ref``, a
    discriminator's mapping), renamed by :func:`_rename`."""
    if isinstance(node, dict):
        return {_rename(k): _renamed(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_renamed(item) for item in node]
    if isinstance(node, str) and node.startswith(_PREFIX):
        return REF.format(model=_rename(node.removeprefix(_PREFIX)))
    return node


def _problem(status: int, problems: Sequence[type[GatewayError]] = ()) -> dict[str, Any]:
    description = ERROR_TEXT.get(status, "Error")
    typed = [p for p in problems if p.status == status]
    if typed:
        description += "; of its own problem type: " + "; ".join(
            f"{p.problem_type} ({p.title}): {inspect.getdoc(p) or p.title}" for p in typed
        )
    return {
        "description": description,
        "content": {PROBLEM_CONTENT_TYPE: {"schema": {"$ref": REF.format(model="Problem")}}},
    }


def error_statuses(op: Operation) -> set[int]:
    """Every error status the operation can answer: its own, and those that come with what it
    reads (a body, parameters, credentials, an Idempotency-Key)."""
    # Every route: a request target holding a '#' (gateway/api/target.py).
    statuses = set(op.errors) | {p.status for p in op.problems} | {400}
    if op.access is Access.PUBLIC:
        return statuses  # the probes read no body, no key, and answer 503 themselves
    statuses.add(503)
    if op.body is not None:
        statuses |= {400, 413, 415, 422}  # not JSON, too large, not JSON's media type, invalid
    if op.params:
        statuses.add(422)  # a path, query or header parameter that breaks its schema
    if op.idempotent:
        statuses |= {400, 409, 422}
    statuses |= {401} if op.access is Access.LEASE else {401, 403}
    return statuses


def _operation(op: Operation, refs: Refs) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "operationId": op.operation_id,
        "summary": op.summary,
        "tags": [op.tag],
    }
    if op.description:
        doc["description"] = op.description
    params: tuple[Param, ...] = (*op.params, IDEMPOTENCY_KEY) if op.idempotent else op.params
    if params:
        doc["parameters"] = [
            {
                "name": p.name,
                "in": p.location,
                "required": p.required,
                "description": p.description,
                "schema": p.schema,
            }
            for p in params
        ]
    if op.body is not None:
        doc["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": refs[(op.body, "validation")]}},
        }
    ok: dict[str, Any] = {"description": "No content" if op.response is None else "OK"}
    if op.response is not None:
        schema = refs[(op.response, "serialization")]
        if op.minimal is not None:  # either shape, by the request's Prefer header
            schema = {"anyOf": [schema, refs[(op.minimal, "serialization")]]}
        ok["content"] = {"application/json": {"schema": schema}}
    if op.text is not None:
        ok = {"description": "OK", "content": {op.text: {"schema": {"type": "string"}}}}
    if op.stream is not None:
        ok.setdefault("content", {})[op.stream] = {
            "schema": {"type": "string", "description": "One JSON object per line, streamed."}
        }
    if op.links:
        ok["links"] = {
            link.name: {"operationId": link.operation_id, "parameters": link.parameters}
            for link in op.links
        }
    responses: dict[str, Any] = {str(op.status): ok}
    for status in op.also:
        # A failure status answered with the operation's own body (a probe's 503).
        responses[str(status)] = ok if status < 400 else {**ok, "description": "Same body"}
    if op.minimal is not None:
        ok["headers"] = dict(APPLIED_HEADER)
    if op.idempotent:
        ok["headers"] = {**REPLAYED_HEADER, **ok.get("headers", {})}
        if op.status == 201:
            responses["200"] = {**ok, "description": "A replay of the first answer"}
    if op.access not in (Access.LEASE, Access.PUBLIC):
        doc["security"] = [{"apiKey": []}]
    else:
        doc["security"] = []
    problems = (*op.problems, IdempotencyKeyReused) if op.idempotent else op.problems
    for status in sorted(error_statuses(op)):
        responses[str(status)] = _problem(status, problems)
    doc["responses"] = responses
    return doc


def build_openapi() -> dict[str, Any]:
    refs, defs = _schemas()
    paths: dict[str, dict[str, Any]] = {}
    for op in OPERATIONS:
        paths.setdefault(op.path, {})[op.method.lower()] = _operation(op, refs)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Jobgate",
            "version": "1",
            "description": "HTTP dispatch gateway for background tasks. Errors are RFC 9457 "
            "problem documents. Worker callbacks are authorised by their lease token.",
        },
        "paths": paths,
        "components": {
            "schemas": dict(sorted(defs.items())),
            "securitySchemes": {
                "apiKey": {"type": "http", "scheme": "bearer", "description": "An API key."}
            },
        },
    }


class _Dumper(yaml.SafeDumper):
    """Writes a schema used twice out twice, not as a YAML anchor and alias."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def to_yaml(document: dict[str, Any]) -> str:
    """YAML in the document's own key order, with non-ASCII text as is."""
    return yaml.dump(document, Dumper=_Dumper, sort_keys=False, allow_unicode=True)


def openapi_yaml() -> str:
    """The document as ``openapi.yaml`` holds it."""
    return to_yaml(build_openapi())
