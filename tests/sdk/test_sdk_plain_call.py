"""A push's plainly valid payload is taken without the model: the arguments it gives are those
``TaskArgs`` gives, and every other payload still goes to the model (and its refusals)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from pydantic import ValidationError

from sdk.arguments import plain_call
from sdk.wire import TaskArgs

PLAIN: list[Any] = [
    None,
    {},
    {"args": []},
    {"kwargs": {}},
    {"args": [], "kwargs": {}},
    {"args": [1, "two", 2.5, True, None, -0.0], "kwargs": {"x": None, "y": "z", "n": 3}},
]

OTHERS: list[Any] = [
    {"args": [[1, 2]], "kwargs": {}},
    {"args": [], "kwargs": {"x": {"y": 1}}},
    {"args": [math.nan]},
    {"args": [math.inf]},
    {"args": [], "results_as": "first"},
    {"args": [], "extra": 1},
    {"args": None},
    {"args": {}, "kwargs": {}},
    {"kwargs": []},
    {"args": "abc"},
    [1, 2],
    "args",
    3,
]


@pytest.mark.parametrize("payload", PLAIN)
def test_a_plain_payload_gives_what_the_model_gives(payload: Any) -> None:
    plain = plain_call(payload)
    assert plain is not None
    call = TaskArgs.model_validate(payload if payload is not None else {})
    assert plain == (call.args, call.kwargs)
    assert call.results_as is None


@pytest.mark.parametrize("payload", OTHERS)
def test_any_other_payload_goes_to_the_model(payload: Any) -> None:
    assert plain_call(payload) is None


def test_the_model_still_refuses_what_it_refused() -> None:
    for payload in ({"args": [math.nan]}, {"args": None}, {"args": [], "extra": 1}, [1, 2]):
        with pytest.raises(ValidationError):
            TaskArgs.model_validate(payload)
