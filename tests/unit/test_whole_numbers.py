"""An integer field of a client's input takes a float with no fraction (JSON Schema counts
``3.0`` as an integer) and refuses anything else that is not an integer: checked on the
field's own value (sdk.wire.base.InputModel), in a batch's tasks as in any other body."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from pydantic import BaseModel

import sdk.wire
from gateway.api.body import parse_model
from gateway.core.errors import ValidationFailed
from sdk.wire import BatchCreate, QueuePolicyPatch, TaskCreate
from sdk.wire.base import InputModel, _integer_fields


def _input_models() -> list[type[BaseModel]]:
    found, waiting = [], [InputModel]
    while waiting:
        model = waiting.pop()
        waiting.extend(model.__subclasses__())
        if model is not InputModel and model.__module__.startswith("sdk.wire"):
            found.append(model)
    return found


def test_sdk_wire_has_integer_fields_to_check() -> None:
    assert sdk.wire  # imported: every wire model is declared
    assert {"priority", "max_attempts"} <= _integer_fields(TaskCreate)
    assert sum(bool(_integer_fields(m)) for m in _input_models()) >= 5


def test_a_batch_takes_whole_floats_as_integers() -> None:
    body = {"tasks": [{"name": "a", "priority": 3.0, "max_attempts": 2.0}, {"name": "b"}]}
    batch = parse_model(BatchCreate, orjson.dumps(body))
    first = batch.tasks[0]
    assert (first.priority, first.max_attempts) == (3, 2)
    assert type(first.priority) is int
    assert type(first.max_attempts) is int
    assert batch.tasks[1].priority == 0


@pytest.mark.parametrize("value", [True, "3", 3.5, 1e300, None])
def test_anything_else_in_an_integer_field_is_refused(value: Any) -> None:
    body = {"tasks": [{"name": "a"}, {"name": "b", "priority": value}]}
    with pytest.raises(ValidationFailed) as refused:
        parse_model(BatchCreate, orjson.dumps(body))
    assert [p.field for p in refused.value.errors] == ["tasks.1.priority"]


def _refused(model: type[BaseModel], body: dict[str, Any]) -> list[str]:
    try:
        parse_model(model, orjson.dumps(body))
    except ValidationFailed as e:
        return [p.field for p in e.errors]
    return []


def test_every_input_model_checks_its_integer_fields() -> None:
    checked = 0
    for model in _input_models():
        for name in _integer_fields(model):
            assert name in _refused(model, {name: 2.5}), (model, name)
            assert name in _refused(model, {name: True}), (model, name)
            assert name not in _refused(model, {name: 2.0}), (model, name)
            checked += 1
    assert checked >= 10


def test_a_whole_float_in_a_patch_is_an_integer() -> None:
    patch = parse_model(QueuePolicyPatch, b'{"max_attempts": 4.0}')
    assert patch.max_attempts == 4
    assert type(patch.max_attempts) is int
