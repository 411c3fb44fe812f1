"""The pure rules of events: a trigger task's derived id, and a trigger's filter."""

from __future__ import annotations

import hashlib

from ulid import ULID

from gateway.core.ids import derived_id
from gateway.services.event_types import AcceptedEvent
from gateway.services.triggers import event_payload, matches, trigger_task_id


def test_a_derived_id_is_the_accepted_ms_and_80_bits_of_the_hash() -> None:
    made = derived_id(1_764_662_400_123, "signup-7", "welcome")
    ulid = ULID.from_str(made)
    assert ulid.milliseconds == 1_764_662_400_123
    digest = hashlib.sha256(b"signup-7\nwelcome").digest()
    assert ulid.bytes[6:] == digest[:10]
    assert derived_id(1_764_662_400_123, "signup-7", "welcome") == made  # anywhere, any time
    assert derived_id(1_764_662_400_123, "signup-7", "other") != made
    assert derived_id(1_764_662_400_124, "signup-7", "welcome") != made


def test_a_trigger_task_is_the_event_and_trigger_id() -> None:
    event = AcceptedEvent("e", "user.created", {"a": 1}, 5)
    assert trigger_task_id(event, "t") == derived_id(5, "e", "t")
    assert event_payload(event) == {
        "kwargs": {"event": {"id": "e", "name": "user.created", "data": {"a": 1}}}
    }


def test_a_filter_is_equality_of_top_level_fields_as_json() -> None:
    data = {"plan": "pro", "seats": 5, "tags": ["a", "b"], "owner": {"id": 1, "x": None}}
    assert matches({}, data)
    assert matches({"plan": "pro"}, data)
    assert matches({"seats": 5.0}, data)  # the same JSON number
    assert matches({"owner": {"x": None, "id": 1.0}}, data)  # objects whole, keys in any order
    assert not matches({"seats": "5"}, data)
    assert not matches({"seats": True}, {"seats": 1})
    assert not matches({"tags": ["b", "a"]}, data)
    assert not matches({"missing": None}, data)
    assert matches({"missing": None}, {"missing": None})
