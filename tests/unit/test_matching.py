"""Matching events to waits and cancel_on entries (gateway/core/matching.py): one canonical JSON
for a match and for the event's values, so a wait is one field of the index and an event finds
it by the shapes waiting on its name."""

from __future__ import annotations

from gateway.core.matching import (
    SEPARATOR,
    candidate_fields,
    canonical,
    index_field,
    matches,
    shape_of,
)


def test_canonical_json_sorts_keys_and_writes_whole_floats_as_integers() -> None:
    assert (
        canonical({"b": 1.0, "a": [2.0, {"y": 1, "x": 0.5}]}) == '{"a":[2,{"x":0.5,"y":1}],"b":1}'
    )
    assert canonical("é") == '"é"'
    assert shape_of({"z": 1, "a": 2}) == '["a","z"]'
    assert shape_of({}) == "[]"


def test_an_event_reaches_the_field_of_every_shape_its_data_has() -> None:
    data = {"invoice": "inv-7", "amount": 10.0, "extra": [1]}
    shapes = ['["invoice"]', '["amount","invoice"]', '["customer"]', "[]"]
    assert candidate_fields("paid", data, shapes) == [
        index_field("paid", {"invoice": "inv-7"}),
        index_field("paid", {"invoice": "inv-7", "amount": 10}),
        index_field("paid", {}),
    ]
    assert index_field("paid", {"amount": 10, "invoice": "inv-7"}) == (
        f'paid{SEPARATOR}{{"amount":10,"invoice":"inv-7"}}'
    )


def test_matches_is_equality_of_every_field_as_json() -> None:
    assert matches({}, {"a": 1})
    assert matches({"a": 1}, {"a": 1.0, "b": 2})
    assert matches({"o": {"x": 1, "y": [1]}}, {"o": {"y": [1], "x": 1}})
    assert not matches({"a": 1}, {"a": "1"})
    assert not matches({"a": None}, {})
    assert matches({"a": None}, {"a": None})
