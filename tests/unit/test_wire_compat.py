"""Forward compatibility of the wire contract (sdk/wire/base.py): an SDK reads an answer from a
newer gateway, with a field it does not know on every object at every depth (inputs a
response holds included, a queue's policy), while the gateway refuses an unknown field at
any depth of a request. The documents are generated from the models' JSON Schemas, so a
model added later is covered without being listed here."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

import sdk.wire
from gateway.api import OPERATIONS
from gateway.api.body import parse_model
from gateway.core.errors import ValidationFailed
from sdk.api import read_answer
from sdk.errors import UnreadableAnswer
from sdk.wire import Job, Queue, Task, TaskState
from sdk.wire.base import InputModel, OutputModel

NEWER = "field_of_a_newer_gateway"
Path = tuple[str, ...]
# A string for each pattern of the contract: the first that the pattern matches is used.
STRINGS = [
    "01J0000000000000000000000A",  # a ULID
    "2030-01-01T00:00:00Z",
    "https://example.com/work",
    "00-0123456789abcdef0123456789abcdef-0123456789abcdef-01",  # a traceparent
    "*",  # a crontab field
    "task_a",
    "UTC",
]


def _models(base: type[BaseModel]) -> Iterator[type[BaseModel]]:
    for model in base.__subclasses__():
        if model.__module__.startswith("sdk.wire."):
            yield model
        yield from _models(model)


OUTPUTS = sorted(set(_models(OutputModel)), key=lambda m: m.__name__)
BODIES = sorted({op.body for op in OPERATIONS if op.body is not None}, key=lambda m: m.__name__)


class Generator:
    """A JSON document that fits a model's JSON Schema, every optional field given but those
    at the paths in ``omit`` (a union of models: member ``choice`` modulo their count), with
    ``NEWER`` added to each object at a path in ``extra_at`` (None: every object)."""

    def __init__(
        self,
        schema: dict[str, Any],
        choice: int = 0,
        extra_at: set[Path] | None = None,
        omit: frozenset[Path] = frozenset(),
    ) -> None:
        self.defs = schema.get("$defs", {})
        self.choice = choice
        self.extra_at = extra_at
        self.omit = omit
        self.objects: list[Path] = []  # every object's path, as generated
        self.optional: list[Path] = []  # every optional field's path, as generated
        self.document = json.dumps(self.value(schema, ()))

    def resolve(self, schema: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in schema:
            schema = self.defs[schema["$ref"].rsplit("/", 1)[1]]
        return schema

    def value(self, schema: dict[str, Any], path: Path) -> Any:
        schema = self.resolve(schema)
        if "properties" in schema:
            return self.object(schema, path)
        if "const" in schema:
            return schema["const"]
        if "enum" in schema:
            return schema["enum"][0]
        members = schema.get("anyOf") or schema.get("oneOf")
        if members:
            usable = [m for m in members if self.resolve(m).get("type") != "null"]
            nested = [m for m in usable if "properties" in self.resolve(m)] or usable
            return self.value(nested[self.choice % len(nested)], path)
        kind = schema.get("type")
        if kind == "array":
            item = self.value(schema.get("items", {}), (*path, "0"))
            return [item] * max(schema.get("minItems", 1), 1)
        if kind == "object":
            for pattern, member in schema.get("patternProperties", {}).items():
                key = _string({"pattern": pattern})
                return {key: self.value(member, (*path, key))}
            member = schema.get("additionalProperties")
            if not isinstance(member, dict):
                return {}
            names = self.resolve(schema.get("propertyNames", {}))
            key = names["enum"][0] if "enum" in names else _string(names)
            return {key: self.value(member, (*path, key))}
        if kind in ("integer", "number"):
            return _number(schema, kind)
        if kind == "boolean":
            return True
        if kind == "string":
            return _string(schema)
        return {"any": [1, "json"]}  # a JSON value

    def object(self, schema: dict[str, Any], path: Path) -> dict[str, Any]:
        self.objects.append(path)
        document = {}
        for name, member in schema["properties"].items():
            if name not in schema.get("required", ()):
                self.optional.append((*path, name))
            if (*path, name) not in self.omit:
                document[name] = self.value(member, (*path, name))
        if self.extra_at is None or path in self.extra_at:
            document[NEWER] = {"new": [1, "two"]}
        return document


def _number(schema: dict[str, Any], kind: str) -> int | float:
    low = schema.get("minimum", schema.get("exclusiveMinimum", 0))
    high = schema.get("maximum", schema.get("exclusiveMaximum", low + 2))
    value = low + 1 if low + 1 < high else (low + high) / 2
    return int(value) if kind == "integer" else float(value)


def _string(schema: dict[str, Any]) -> str:
    if schema.get("format") == "date-time":
        return "2030-01-01T00:00:00Z"
    pattern = schema.get("pattern")
    if pattern is None:
        return "x" * max(int(schema.get("minLength", 1)), 1)
    for text in STRINGS:
        if re.search(pattern, text):
            return text
    raise AssertionError(f"no string in STRINGS fits the pattern {pattern!r}: add one")


def answers(model: type[BaseModel]) -> Iterator[str]:
    """``model``'s answers with ``NEWER`` in every object, one per choice of union members (two
    cover every union of the contract's models so far: a schedule is a crontab or an
    interval)."""
    schema = model.model_json_schema(mode="serialization")
    for choice in range(2):
        yield Generator(schema, choice).document


def _refusal(model: type[BaseModel], body: Generator) -> tuple[Path, str] | None:
    """Where the gateway refuses ``body`` first, and why; None when it takes it."""
    try:
        parse_model(model, body.document.encode())
    except ValidationFailed as e:
        field = e.errors[0].field
        return (() if field == "body" else tuple(field.split("."))), e.errors[0].reason
    return None


def requests(model: type[BaseModel]) -> Iterator[Generator]:
    """``model``'s request bodies that the gateway takes, one per choice of union members: an
    optional field is left out where the model refuses it, or refuses the whole with it (a
    rule across fields, such as "give either ids or filter"; a task's debounce or throttle,
    the one choice keeping the one, the other the other)."""
    schema = model.model_json_schema(mode="validation")
    for choice in range(2):
        body = Generator(schema, choice, set())
        while (refused := _refusal(model, body)) is not None:
            at = refused[0]
            left = [p for p in body.optional if p not in body.omit and at in (p, p[:-1])]
            # An object last, as it is a depth; of two objects that exclude each other, the
            # first choice keeps the first and the second the other.
            order = {p: i if choice % 2 == 0 else -i for i, p in enumerate(left)}
            left.sort(key=lambda p: (p in body.objects, order[p]))
            tries = [Generator(schema, choice, set(), body.omit | {p}) for p in left]
            mended = [b for b in tries if at in b.omit or _refusal(model, b) != refused]
            assert mended, f"{model.__name__} refuses its generated body: {refused}"
            body = mended[0]
        yield body


@pytest.mark.parametrize("model", OUTPUTS, ids=lambda m: m.__name__)
def test_an_answer_with_fields_of_a_newer_gateway_at_every_depth_reads(
    model: type[BaseModel],
) -> None:
    for document in answers(model):
        read_answer(model, document.encode())  # no error: the new fields are ignored
        assert NEWER not in json.dumps(model.model_validate_json(document).model_dump(mode="json"))


def test_the_answers_that_hold_input_models_are_among_those_read() -> None:
    """The hole this closes: a queue's policy is the input model it was created with."""
    document = next(answers(Queue))
    assert NEWER in json.loads(document)["policy"]["backoff"]
    with pytest.raises(ValidationError, match=NEWER):
        Queue.model_validate_json(document, extra="forbid")  # the generated extras do reach
    queue = Queue.model_validate_json(document)
    assert queue.policy.backoff.base_delay >= 0
    for document in answers(Job):
        assert NEWER in json.loads(document)["schedule"]
        assert Job.model_validate_json(document).schedule is not None


@pytest.mark.parametrize("model", BODIES, ids=lambda m: m.__name__)
def test_a_request_with_an_unknown_field_at_any_depth_is_refused(model: type[BaseModel]) -> None:
    assert issubclass(model, InputModel)
    schema = model.model_json_schema(mode="validation")
    for body in requests(model):
        for path in body.objects:
            extra = Generator(schema, body.choice, {path}, body.omit).document
            with pytest.raises(ValidationFailed) as refused:
                parse_model(model, extra.encode())
            fields = [p.field for p in refused.value.errors]
            assert fields == [".".join((*path, NEWER))], (path, fields)


def test_an_unknown_enum_value_from_a_newer_gateway_is_a_clear_error() -> None:
    """Not guessed at: a task in a state this SDK does not know cannot be waited for right."""
    document = next(answers(Task))
    task = json.loads(document)
    task["state"] = "hibernating"
    with pytest.raises(UnreadableAnswer) as unreadable:
        read_answer(Task, json.dumps(task).encode())
    error = unreadable.value
    assert error.unknown_value
    assert isinstance(error, ValueError)
    assert ("state", error.errors[0][1], "hibernating") in error.errors
    assert "gateway is likely newer than the SDK; upgrade the SDK" in str(error)
    assert "state: Input should be" in str(error)
    assert "(got 'hibernating')" in str(error)
    task["state"] = TaskState.QUEUED.value
    task.pop("id")
    with pytest.raises(UnreadableAnswer) as missing:
        read_answer(Task, json.dumps(task).encode())
    assert not missing.value.unknown_value
    assert "upgrade" not in str(missing.value)


def test_every_model_of_the_contract_is_an_input_or_an_output() -> None:
    """So every model falls under one of the two rules (sdk/wire/base.py)."""
    wire = {
        value
        for value in vars(sdk.wire).values()
        if isinstance(value, type) and issubclass(value, BaseModel)
    }
    assert wire
    assert all(issubclass(m, InputModel | OutputModel) for m in wire)


def test_a_queue_counting_a_state_this_sdk_does_not_know_reads_without_it() -> None:
    """A tally may leave a state out; a queue that fails to read for it would fail them all."""
    queue = json.loads(next(answers(Queue)))
    queue["counts"] = {"queued": 3, "hibernating": 2}
    assert read_answer(Queue, json.dumps(queue).encode()).counts == {TaskState.QUEUED: 3}
