"""Matching events to waits and cancel_on entries (docs/durable.md, "Waiting for an event"), as
pure functions: the canonical form of a match, its shape, and the index fields an event's data
can reach.

A match is equality on top-level fields of the event's data. Both sides are written in one
canonical JSON (keys sorted, no spaces, a whole float written as an integer), so a match is
one field of the queue's ``waits`` hash, and an event finds the waits it matches with one HGET
per shape (the sorted field names of the matches waiting on that event name): for each shape
whose fields its data all has, the field made of its values.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

from pydantic import JsonValue

SEPARATOR = "\x1f"  # between the event name and the canonical match (event names hold none)


def _plain(value: JsonValue) -> JsonValue:
    """``value`` with every whole float an int (``1.0`` matches ``1``), recursively."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def canonical(value: JsonValue) -> str:
    """``value`` as canonical JSON: keys sorted, no spaces, whole floats as integers."""
    return json.dumps(
        _plain(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def shape_of(match: Mapping[str, JsonValue]) -> str:
    """A match's shape: the canonical JSON of its sorted field names."""
    names: list[JsonValue] = [*sorted(match)]
    return canonical(names)


def index_field(event: str, match: Mapping[str, JsonValue]) -> str:
    """The ``waits`` field of a wait (or cancel_on entry) for ``event`` with ``match``."""
    return f"{event}{SEPARATOR}{canonical(dict(match))}"


def candidate_fields(event: str, data: Mapping[str, JsonValue], shapes: Iterable[str]) -> list[str]:
    """The ``waits`` fields an event named ``event`` with ``data`` matches: one per shape whose
    field names ``data`` all has (a shape that is not a JSON list of names is skipped)."""
    fields = []
    for shape in shapes:
        names = json.loads(shape)
        if isinstance(names, list) and all(isinstance(n, str) and n in data for n in names):
            fields.append(index_field(event, {n: data[n] for n in names}))
    return fields


def matches(match: Mapping[str, JsonValue], data: Mapping[str, JsonValue]) -> bool:
    """Whether ``data`` has every field of ``match`` at the same value (as canonical JSON)."""
    return all(k in data and canonical(data[k]) == canonical(v) for k, v in match.items())
