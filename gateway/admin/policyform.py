"""The queue settings form, built from the JSON Schema of the API's ``QueuePolicy`` and checked
by the API's ``QueuePolicyPatch``, so the form and ``PATCH /v1/queues/{queue}`` cannot disagree.

Each policy field is an input named by its path (``lease_timeout``, ``backoff.base_delay``): a
number box for a number, a box to tick for a boolean, a choice for an enum, boxes to tick for a
list of enum values (``redrive.on``), and a JSON box for a map (``task_rate_limits``). A section
(``backoff``, ``circuit_breaker``) is a fieldset; a section the policy may go without
(``rate_limit``, ``key_rate_limit``, ``key_concurrency``, ``redrive``) has a box to tick
(``use.<section>``), and unticking it sends its ``remove_<section>``. Only the fields whose
value differs from the stored policy are sent, so two admins editing different fields do not
undo each other.
Problems come back named by the API's field paths with pydantic's messages, as a 422 of the
API would name them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from functools import lru_cache
from typing import Any

from pydantic import ValidationError

from sdk.wire import DAY, QueuePolicy, QueuePolicyPatch
from sdk.wire.base import reason

USE = "use."  # the prefix of an optional section's box: ``use.rate_limit``


class Kind(StrEnum):
    INTEGER = "integer"
    NUMBER = "number"
    BOOLEAN = "boolean"
    CHOICE = "choice"
    CHOICES = "choices"  # several of a set (boxes to tick)
    TEXT = "text"
    JSON = "json"


@dataclass(frozen=True, slots=True)
class Input:
    path: str  # the form field's name and the API's field path
    kind: Kind
    description: str = ""
    choices: tuple[str, ...] = ()
    optional: bool = False  # may stay empty: left as it is
    default: str = ""  # shown in a section that is off, ready to be turned on
    seconds: bool = False  # a duration in seconds
    value: str = ""  # what the input holds (CHOICES: the chosen, comma-separated)
    problem: str = ""

    @property
    def label(self) -> str:
        return self.path.rsplit(".", 1)[-1].replace("_", " ")

    @property
    def chosen(self) -> tuple[str, ...]:
        return tuple(v for v in self.value.split(",") if v)


@dataclass(frozen=True, slots=True)
class Section:
    name: str  # "" for the top-level fields
    description: str
    inputs: tuple[Input, ...]
    optional: bool = False  # may be off (removed from the policy)
    on: bool = True
    problem: str = ""  # a rule of the section as a whole (redrive's on: no kind twice)

    @property
    def label(self) -> str:
        return self.name.replace("_", " ")


@dataclass(frozen=True, slots=True)
class PolicyForm:
    sections: tuple[Section, ...]
    problems: tuple[tuple[str, str], ...] = field(default=())  # every (field, message)


def _resolve(schema: Mapping[str, Any], defs: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
    """A property's schema with ``$ref`` and ``Optional`` unwrapped, and whether it may be
    null."""
    nullable = False
    options = schema.get("anyOf")
    if isinstance(options, list):
        kept = [o for o in options if o.get("type") != "null"]
        nullable = len(kept) < len(options)
        if len(kept) == 1:
            schema = {**kept[0], **{k: v for k, v in schema.items() if k != "anyOf"}}
    ref = schema.get("$ref")
    if isinstance(ref, str):
        target = defs[ref.rsplit("/", 1)[-1]]
        schema = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
    return dict(schema), nullable


def _input(path: str, raw: Mapping[str, Any], defs: Mapping[str, Any]) -> Input:
    schema, nullable = _resolve(raw, defs)
    description = str(schema.get("description", "")).replace("``", "")
    kind = schema.get("type")
    if isinstance(schema.get("enum"), list):
        found = Input(path, Kind.CHOICE, description, tuple(map(str, schema["enum"])))
    elif kind == "array":
        items, _ = _resolve(schema.get("items", {}), defs)
        choices = tuple(map(str, items.get("enum", [])))
        found = Input(path, Kind.CHOICES, description, choices, default=",".join(choices))
    elif kind in ("integer", "number"):
        # sdk.wire's Seconds and PositiveSeconds go up to a year; others say so in words
        seconds = schema.get("maximum") == 365 * DAY or description.startswith("Seconds")
        found = Input(path, Kind(kind), description, optional=nullable, seconds=seconds)
    elif kind == "boolean":
        found = Input(path, Kind.BOOLEAN, description)
    elif kind == "string":
        found = Input(path, Kind.TEXT, description, optional=nullable)
    else:
        found = Input(path, Kind.JSON, description)
    if "default" in schema:
        found = replace(found, default=_text(found.kind, schema["default"]))
    return found


@lru_cache(maxsize=1)
def _blank() -> tuple[Section, ...]:
    schema = QueuePolicy.model_json_schema()
    defs = schema.get("$defs", {})
    top: list[Input] = []
    sections: list[Section] = []
    for name, raw in schema["properties"].items():
        resolved, nullable = _resolve(raw, defs)
        if resolved.get("type") == "object" and isinstance(resolved.get("properties"), dict):
            inputs = tuple(
                _input(f"{name}.{sub}", s, defs) for sub, s in resolved["properties"].items()
            )
            description = str(raw.get("description") or resolved.get("description", ""))
            sections.append(Section(name, description.replace("``", ""), inputs, nullable))
        else:
            top.append(_input(name, raw, defs))
    return (Section("", "", tuple(top)), *sections)


def _text(kind: Kind, value: Any) -> str:
    if value is None:
        return ""
    if kind is Kind.BOOLEAN:
        return "true" if value else ""
    if kind is Kind.CHOICES:
        return ",".join(map(str, value))
    if kind is Kind.JSON:
        return json.dumps(value, indent=1) if value else ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _leaf(i: Input) -> str:
    """The input's field name within its section."""
    return i.path.rsplit(".", 1)[-1]


def form_for(policy: QueuePolicy) -> PolicyForm:
    """The form holding ``policy``."""
    stored = policy.model_dump(mode="json")
    sections = []
    for s in _blank():
        values = stored if not s.name else (stored.get(s.name) or {})
        on = not s.name or stored.get(s.name) is not None
        inputs = tuple(
            replace(
                i, value=_text(i.kind, values.get(i.path.rsplit(".", 1)[-1])) if on else i.default
            )
            for i in s.inputs
        )
        sections.append(replace(s, inputs=inputs, on=on))
    return PolicyForm(tuple(sections))


def _number(text: str) -> Any:
    """A number typed, as JSON would read it; the text itself when it is not one (the model
    then says what it should be)."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        number = float(text)
    except ValueError:
        return text
    return number if math.isfinite(number) else text


def _value(i: Input, form: Mapping[str, list[str]]) -> tuple[Any, str]:
    """The value an input sends (``...`` for nothing) and the text to show again."""
    given = form.get(i.path, [])
    if i.kind is Kind.BOOLEAN:
        return bool(given and given[0]), "true" if given and given[0] else ""
    if i.kind is Kind.CHOICES:
        return list(given), ",".join(given)
    text = (given[0] if given else "").strip()
    if text == "" and i.kind is not Kind.JSON:
        return (None if i.optional else ""), ""
    if i.kind in (Kind.INTEGER, Kind.NUMBER):
        return _number(text), text
    if i.kind is Kind.JSON:
        try:
            return (json.loads(text) if text else {}), text
        except ValueError:
            return text, text  # the model says it is not an object
    return text, text


def read(
    form: Mapping[str, list[str]], stored: QueuePolicy
) -> tuple[QueuePolicyPatch | None, PolicyForm]:
    """The patch a submitted form asks for (only the fields that changed; None when something
    is wrong) and the form to show again, with what was typed and the problems."""
    sections: list[Section] = []
    body: dict[str, Any] = {}
    for s in _blank():
        on = not s.optional or bool(form.get(f"{USE}{s.name}"))
        inputs = []
        values: dict[str, Any] = {}
        for i in s.inputs:
            value, text = _value(i, form)
            # a section that is off sends nothing (its fields are disabled): show its defaults
            inputs.append(replace(i, value=text if on else i.default))
            if value is not None:
                values[_leaf(i)] = value
        sections.append(replace(s, inputs=tuple(inputs), on=on))
        if not s.name:
            body.update(values)
        elif on:
            body[s.name] = values
        else:
            body[f"remove_{s.name}"] = True
    try:
        patch = QueuePolicyPatch.model_validate(body)
    except ValidationError as e:
        return None, _with_problems(sections, e)
    current = stored.model_dump(mode="json")
    asked = patch.model_dump(mode="json", exclude_none=True)
    changed = {k: v for k, v in asked.items() if _changes(k, v, current)}
    return QueuePolicyPatch.model_validate(changed), PolicyForm(tuple(sections))


def _changes(key: str, value: Any, current: Mapping[str, Any]) -> bool:
    """Whether sending ``key: value`` changes the stored policy ``current``."""
    if key.startswith("remove_"):
        return current.get(key.removeprefix("remove_")) is not None
    return bool(value != current.get(key))


def _with_problems(sections: list[Section], e: ValidationError) -> PolicyForm:
    problems = []
    by_path: dict[str, str] = {}
    for err in e.errors():
        loc = [str(p) for p in err["loc"]]
        if loc and loc[0] == "task_rate_limits":  # one JSON box
            loc = loc[:1]
        elif len(loc) > 2 and loc[0] == "redrive" and loc[1] == "on":
            loc = loc[:2]
        path = ".".join(loc) or "form"
        message = reason(err)
        problems.append((path, message))
        by_path.setdefault(path, message)
    shown = []
    for s in sections:
        inputs = tuple(replace(i, problem=by_path.get(i.path, "")) for i in s.inputs)
        shown.append(replace(s, inputs=inputs, problem=by_path.get(s.name, "") if s.name else ""))
    return PolicyForm(tuple(shown), tuple(problems))
