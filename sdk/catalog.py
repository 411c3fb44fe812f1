"""The task catalog, worker side: each task function's payload schema, derived from its hints.

A producer sends a task function's arguments as ``{"args": [...], "kwargs": {...}}``
(:class:`~sdk.wire.TaskArgs`), and the worker calls ``fn(*args, **kwargs)``. The schema
:func:`payload_schema` makes (JSON Schema draft 2020-12) accepts exactly the payloads that bind
to the function's parameters (``ctx`` aside) with values of their annotated types:

- ``properties.args``: the positional parameters in order (``prefixItems``), at most as many
  as there are unless the function takes ``*args`` (then ``items`` is its element type);
- ``properties.kwargs``: every parameter that may be passed by name (``properties``, with its
  ``default`` when it has a JSON one; a parameter without ``default`` is required), no other
  names unless the function takes ``**kwargs`` (``additionalProperties``);
- ``allOf``: one rule per required parameter that can come either way (by position ``i``, or
  by name: ``kwargs`` must name it when ``args`` has at most ``i`` items), and one per such
  parameter forbidding it both ways at once;
- ``type`` is ``["object", "null"]`` when no parameter is required (``null`` means no
  arguments), else ``"object"``. Shared definitions (pydantic models) are in ``$defs``.

Each type is described by pydantic (``TypeAdapter``'s JSON Schema in validation mode): ``int``,
``str``, ``Optional[...]``, ``Literal``, enums, dataclasses, pydantic models, lists, dicts....
A parameter without an annotation, or whose type pydantic cannot describe, accepts any value.

A form can be built from ``properties.kwargs.properties`` alone: every parameter appears there
unless it is positional-only.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import typing
import warnings
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from pydantic import Field, PydanticSchemaGenerationError, TypeAdapter, create_model
from pydantic_core import PydanticSerializationError, to_jsonable_python

from sdk.binding import Signature
from sdk.wire import CatalogTask

__all__ = ["catalog", "describe", "payload_schema"]

log = logging.getLogger(__name__)

DRAFT = "https://json-schema.org/draft/2020-12/schema"
_P = inspect.Parameter
_BY_POSITION = (_P.POSITIONAL_ONLY, _P.POSITIONAL_OR_KEYWORD)
_BY_NAME = (_P.POSITIONAL_OR_KEYWORD, _P.KEYWORD_ONLY)
_MAX_DESCRIPTION = 2000


class Described(Protocol):
    """What the catalog reads of a task function (:class:`~sdk.tasks.TaskFunction`); a
    protocol, so that the clients can describe task functions without importing them back."""

    @property
    def fn(self) -> Callable[..., Any]: ...
    @property
    def name(self) -> str: ...
    @property
    def queue(self) -> str: ...
    @property
    def signature(self) -> Signature: ...


def describe(task: Described) -> CatalogTask:
    """The catalog entry of a task function: its name, payload schema and description (the
    first paragraph of its docstring)."""
    doc = inspect.getdoc(task.fn)
    description = doc.split("\n\n")[0].strip()[:_MAX_DESCRIPTION] if doc else None
    return CatalogTask.model_validate(
        {
            "name": task.name,
            "schema": payload_schema(task.fn, task.signature),
            "description": description or None,
        }
    )


def catalog(tasks: Iterable[Described], queue: str | None = None) -> list[CatalogTask]:
    """The catalog entries of ``tasks`` (those of ``queue`` only, when given): what an
    endpoint serving them reports (``Client.add_endpoint(..., tasks=...)``)."""
    return [describe(fn) for fn in tasks if queue is None or fn.queue == queue]


def _hints(fn: Callable[..., Any]) -> dict[str, Any]:
    """The resolved annotations of ``fn``; when some name cannot be resolved (a type defined
    inside a function, under ``from __future__ import annotations``), each one that can."""
    try:
        return typing.get_type_hints(fn, include_extras=True)
    except Exception:
        pass
    hints: dict[str, Any] = {}
    namespace = getattr(fn, "__globals__", {})
    for name, annotation in getattr(fn, "__annotations__", {}).items():
        try:
            hints[name] = eval(annotation, namespace) if isinstance(annotation, str) else annotation
        except Exception as e:
            log.warning("cannot resolve the type of %r's %s (%s): not checked", fn, name, e)
    return hints


def _describable(annotation: Any) -> Any:
    """The annotation, or ``Any`` when pydantic cannot make a JSON Schema of it."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            TypeAdapter(annotation).json_schema(mode="validation")
    except (PydanticSchemaGenerationError, TypeError, ValueError, NameError):
        return Any
    return annotation


def _parameter_schemas(
    params: list[inspect.Parameter], hints: dict[str, Any]
) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """Each parameter's schema (for ``*args`` / ``**kwargs``: of one element) and the shared
    ``$defs``, made in one pass so models used by several parameters are defined once."""
    fields: dict[str, Any] = {
        f"p{i}": (_describable(hints.get(p.name, Any)), Field(alias=p.name))
        for i, p in enumerate(params)
    }
    model = create_model("Parameters", **fields)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        full = model.model_json_schema(by_alias=True, mode="validation")
    schemas: dict[str, dict[str, Any]] = {}
    for p in params:
        schema = dict(full["properties"][p.name])
        schema.pop("title", None)
        if p.default is not _P.empty:
            # a default that is not JSON goes unshown: the parameter is optional all the same
            with contextlib.suppress(PydanticSerializationError):
                schema["default"] = to_jsonable_python(p.default)
        schemas[p.name] = schema
    return schemas, full.get("$defs", {})


def payload_schema(fn: Callable[..., Any], signature: Signature | None = None) -> dict[str, Any]:
    """The JSON Schema of the payloads ``fn`` accepts (see the module docstring)."""
    signature = signature or Signature.of(fn)
    params = list(signature.producer.parameters.values())
    schemas, defs = _parameter_schemas(params, _hints(fn))
    positional = [p for p in params if p.kind in _BY_POSITION]
    var_args = next((p for p in params if p.kind is _P.VAR_POSITIONAL), None)
    var_kwargs = next((p for p in params if p.kind is _P.VAR_KEYWORD), None)

    args: dict[str, Any] = {"type": "array"}
    if positional:
        args["prefixItems"] = [schemas[p.name] for p in positional]
    if var_args is not None:
        args["items"] = schemas[var_args.name]
    else:
        args["maxItems"] = len(positional)
    required_by_position = sum(
        1 for p in positional if p.kind is _P.POSITIONAL_ONLY and p.default is _P.empty
    )
    if required_by_position:
        args["minItems"] = required_by_position

    kwargs: dict[str, Any] = {
        "type": "object",
        "properties": {p.name: schemas[p.name] for p in params if p.kind in _BY_NAME},
        "additionalProperties": schemas[var_kwargs.name] if var_kwargs is not None else False,
    }
    keyword_only = [p.name for p in params if p.kind is _P.KEYWORD_ONLY and p.default is _P.empty]
    if keyword_only:
        kwargs["required"] = keyword_only

    rules: list[dict[str, Any]] = []
    for i, p in enumerate(positional):
        if p.kind is not _P.POSITIONAL_OR_KEYWORD:
            continue
        if p.default is _P.empty:  # by position i, or else by name
            rules.append(
                {
                    "if": {"properties": {"args": {"maxItems": i}}},
                    "then": {
                        "required": ["kwargs"],
                        "properties": {"kwargs": {"required": [p.name]}},
                    },
                }
            )
        rules.append(  # not both ways at once
            {
                "if": {"required": ["args"], "properties": {"args": {"minItems": i + 1}}},
                "then": {"properties": {"kwargs": {"properties": {p.name: False}}}},
            }
        )

    required = [
        name
        for name, needed in (("args", required_by_position), ("kwargs", keyword_only))
        if needed
    ]
    anything_required = bool(required) or any(
        p.kind is _P.POSITIONAL_OR_KEYWORD and p.default is _P.empty for p in positional
    )
    schema: dict[str, Any] = {
        "$schema": DRAFT,
        "type": "object" if anything_required else ["object", "null"],
        "properties": {"args": args, "kwargs": kwargs},
        "additionalProperties": False,
    }
    if required:
        schema["required"] = required
    if rules:
        schema["allOf"] = rules
    if defs:
        schema["$defs"] = defs
    return schema
