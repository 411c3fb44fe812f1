"""A validation error names its field by its path in the JSON body: pydantic's locations carry
the tag of a discriminated union's member, which the body has no level for."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from gateway.api.body import field_path, field_problems
from sdk.wire import JobCreate

JOB: dict[str, Any] = {"title": "t", "task": {"queue": "q", "name": "n"}}


@pytest.mark.parametrize(
    ("schedule", "fields"),
    [
        ({"kind": "crontab", "timezone": "Mars/Olympus"}, ["schedule.timezone"]),
        ({"kind": "crontab", "minute": "?"}, ["schedule.minute"]),
        ({"kind": "interval", "seconds": 0}, ["schedule"]),
        ({"kind": "interval", "seconds": -1, "extra": 1}, ["schedule.seconds", "schedule.extra"]),
        ({"kind": "weekly"}, ["schedule"]),
    ],
)
def test_a_schedule_error_names_the_field_where_the_body_has_it(
    schedule: dict[str, Any], fields: list[str]
) -> None:
    body = {**JOB, "schedule": schedule}
    with pytest.raises(ValidationError) as caught:
        JobCreate.model_validate(body, strict=True)
    assert [p.field for p in field_problems(caught.value, body)] == fields


def test_a_field_named_like_a_tag_is_kept() -> None:
    assert field_path(("items", 1, "crontab"), {"items": [{}, {"kind": "x"}]}) == "items.1.crontab"
    assert field_path(("a", "x", "b"), {"a": {"kind": "x"}}) == "a.b"
    assert field_path(("a", "kind"), {"a": {"kind": "kind"}}) == "a.kind"
    assert field_path(("missing", "deeper"), {}) == "missing.deeper"
