"""Form fields for a task's arguments, built from the JSON Schema its endpoints reported.

The job and run-now forms show one input per parameter instead of a JSON box, when the task
catalog has a schema that can be read that way:

- the SDK convention (``properties.kwargs.properties``, see ``sdk.catalog``): one field per
  parameter, and the payload is ``{"kwargs": {...}}``;
- any other object schema with ``properties``: one field per property, and the payload is the
  object itself;
- anything else (or no schema, or args that do not fit the fields): a JSON text box.

Each field's input follows its type: a number box for ``integer``/``number``, a choice for a
``boolean`` or an ``enum``/``const``, a text box for a ``string``, and a JSON box for the rest.
A field left empty is left out of the payload (so the parameter's default applies); what the
values mean is then checked by the catalog, as for the JSON API, and its 422 names the field.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from pydantic import JsonValue
from pydantic_core import from_json

from gateway.core.errors import FieldProblem

FIELD_PREFIX = "arg."
"""Form field names of the per-parameter inputs: ``arg.<parameter>``."""
JSON_FIELD = "args_json"
"""The form field of the JSON text box."""


class Shape(StrEnum):
    KWARGS = "kwargs"  # SDK tasks: {"kwargs": {name: value}}
    OBJECT = "object"  # {name: value}
    JSON = "json"  # a JSON text box


class Kind(StrEnum):
    INTEGER = "integer"
    NUMBER = "number"
    BOOLEAN = "boolean"
    CHOICE = "choice"
    STRING = "string"
    JSON = "json"


@dataclass(frozen=True, slots=True)
class ArgField:
    name: str
    kind: Kind
    required: bool
    description: str = ""
    choices: tuple[str, ...] = ()  # JSON texts of the allowed values (CHOICE, BOOLEAN)
    default: str = ""  # JSON text of the default, shown as a hint
    value: str = ""  # what the input holds

    @property
    def input_name(self) -> str:
        return FIELD_PREFIX + self.name


@dataclass(frozen=True, slots=True)
class ArgsForm:
    """What the form shows for the args: fields, or a JSON box holding ``text``."""

    shape: Shape
    fields: tuple[ArgField, ...] = ()
    text: str = ""
    problems: tuple[FieldProblem, ...] = field(default=())


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _nullable(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    """``Optional[X]`` (``anyOf: [X, {"type": "null"}]``) read as ``X``."""
    options = schema.get("anyOf")
    if isinstance(options, list):
        kept = [o for o in options if isinstance(o, dict) and o.get("type") != "null"]
        if len(kept) == 1 and len(kept) < len(options):
            return {**kept[0], **{k: v for k, v in schema.items() if k != "anyOf"}}
    return schema


def _resolved(schema: Mapping[str, Any], root: Mapping[str, Any]) -> Mapping[str, Any]:
    """``schema`` with a local ``$ref`` (``#/$defs/Colour``) replaced by what it points at."""
    ref = schema.get("$ref")
    if not isinstance(ref, str) or not ref.startswith("#/"):
        return schema
    target: Any = root
    for part in ref[2:].split("/"):
        target = target.get(part) if isinstance(target, dict) else None
    if not isinstance(target, dict):
        return schema
    return {**target, **{k: v for k, v in schema.items() if k != "$ref"}}


def _field(name: str, raw: Any, required: bool, root: Mapping[str, Any]) -> ArgField:
    schema: Mapping[str, Any] = {}
    if isinstance(raw, dict):
        schema = _resolved(_nullable(_resolved(raw, root)), root)
    kind = Kind.JSON
    choices: tuple[str, ...] = ()
    kinds = schema.get("type")
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        kind, choices = Kind.CHOICE, tuple(_json(v) for v in schema["enum"])
    elif "const" in schema:
        kind, choices = Kind.CHOICE, (_json(schema["const"]),)
    elif kinds in ("integer", "number", "string"):
        kind = Kind(kinds)
    elif kinds == "boolean":
        kind, choices = Kind.BOOLEAN, ("true", "false")
    description = schema.get("description") or schema.get("title") or ""
    default = _json(schema["default"]) if "default" in schema else ""
    return ArgField(name, kind, required, str(description), choices, default)


def _required_by_name(schema: Mapping[str, Any]) -> set[str]:
    """Parameters the SDK schema requires: keyword-only ones, and those required "by position
    or else by name" (its ``allOf`` rules)."""
    kwargs = schema["properties"]["kwargs"]
    required = set(kwargs.get("required", []))
    for rule in schema.get("allOf", []):
        then = rule.get("then", {}) if isinstance(rule, dict) else {}
        inner = then.get("properties", {}).get("kwargs", {})
        if isinstance(inner, dict):
            required.update(inner.get("required", []))
    return required


def fields_of(schema: Mapping[str, Any] | None) -> tuple[Shape, tuple[ArgField, ...]]:
    """How a payload of ``schema`` is entered: its shape and its fields."""
    if not schema:
        return Shape.JSON, ()
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return Shape.JSON, ()
    kwargs = properties.get("kwargs")
    if isinstance(kwargs, dict) and isinstance(kwargs.get("properties"), dict):
        try:
            required = _required_by_name(schema)
        except (KeyError, AttributeError, TypeError):
            required = set()
        params = kwargs["properties"]
        return Shape.KWARGS, tuple(_field(n, s, n in required, schema) for n, s in params.items())
    required = set(schema.get("required", []) or [])
    return Shape.OBJECT, tuple(_field(n, s, n in required, schema) for n, s in properties.items())


def _text(kind: Kind, value: JsonValue) -> str:
    if kind is Kind.STRING and isinstance(value, str):
        return value
    return _json(value)


def _values(shape: Shape, args: JsonValue) -> Mapping[str, JsonValue] | None:
    """The named values of ``args``, or None when they cannot be shown as fields."""
    if args is None:
        return {}
    if not isinstance(args, dict):
        return None
    if shape is Shape.OBJECT:
        return args
    if set(args) - {"args", "kwargs"} or args.get("args"):
        return None  # positional values: shown as JSON
    kwargs = args.get("kwargs") or {}
    return kwargs if isinstance(kwargs, dict) else None


def form_for(
    schema: Mapping[str, Any] | None, args: JsonValue, *, as_json: bool = False
) -> ArgsForm:
    """The args form for a task's ``schema``, holding ``args``; a JSON box when asked, when
    the schema has no fields, or when ``args`` has values the fields cannot show."""
    shape, fields = fields_of(schema)
    values = None if as_json or shape is Shape.JSON else _values(shape, args)
    if values is None or set(values) - {f.name for f in fields}:
        return ArgsForm(Shape.JSON, text="" if args is None else json.dumps(args, indent=2))
    filled = tuple(
        replace(f, value=_text(f.kind, values[f.name])) if f.name in values else f for f in fields
    )
    return ArgsForm(shape, filled)


def _loads(text: str) -> JsonValue:
    """JSON as the API reads it: no NaN or Infinity, nesting bounded (ValueError otherwise)."""
    value: JsonValue = from_json(text, allow_inf_nan=False)
    return value


def _parse(f: ArgField, text: str, where: str) -> tuple[JsonValue, FieldProblem | None]:
    try:
        if f.kind is Kind.STRING:
            return text, None
        if f.kind is Kind.INTEGER:
            return int(text), None
        if f.kind is Kind.NUMBER:
            number = float(text)
            if not math.isfinite(number):
                raise ValueError(text)
            return (int(number) if number.is_integer() and "." not in text else number), None
        return _loads(text), None
    except ValueError:
        reason = {
            Kind.INTEGER: "must be a whole number",
            Kind.NUMBER: "must be a number",
        }.get(f.kind, "must be JSON (a string in double quotes)")
        return None, FieldProblem(where, reason)


def read_args(
    shape: Shape, fields: tuple[ArgField, ...], form: Mapping[str, str | None]
) -> tuple[JsonValue, ArgsForm]:
    """The payload a submitted form describes, and the form to show again (with the values
    typed and the problems found, naming ``args.<path>`` as the API does)."""
    if shape is Shape.JSON:
        text = (form.get(JSON_FIELD) or "").strip()
        if not text:
            return None, ArgsForm(Shape.JSON, text="")
        try:
            value = _loads(text)
        except ValueError as e:
            bad = FieldProblem("args", f"is not JSON: {e}")
            return None, ArgsForm(Shape.JSON, text=text, problems=(bad,))
        return value, ArgsForm(Shape.JSON, text=text)
    values: dict[str, JsonValue] = {}
    problems: list[FieldProblem] = []
    typed: list[ArgField] = []
    for f in fields:
        text = form.get(f.input_name) or ""
        typed.append(replace(f, value=text))
        if text == "" or (text.strip() == "" and f.kind is not Kind.STRING):
            continue  # left out: the default applies (the catalog says if one is missing)
        where = f"args.kwargs.{f.name}" if shape is Shape.KWARGS else f"args.{f.name}"
        value, problem = _parse(f, text if f.kind is Kind.STRING else text.strip(), where)
        if problem is not None:
            problems.append(problem)
        else:
            values[f.name] = value
    shown = ArgsForm(shape, tuple(typed), problems=tuple(problems))
    return ({"kwargs": values} if shape is Shape.KWARGS else values), shown
