"""Where JSON Schema can say a rule, openapi.yaml says it: a value the schema admits is one the
models accept, and one they refuse the schema refuses too (the Schemathesis contract run checks
the same with generated requests; these pin the cases that once disagreed)."""

from __future__ import annotations

import zoneinfo
from typing import Any

import jsonschema_rs
import pytest
from pydantic import ValidationError

from gateway.api.openapi import build_openapi
from gateway.ssrf import parse_endpoint_url
from sdk.wire import CrontabSchedule, EndpointTasks, QueuePolicyPatch
from sdk.wire.timezones import timezones

SCHEMAS = build_openapi()["components"]["schemas"]


def admits(schema: dict[str, Any], value: Any) -> bool:
    return jsonschema_rs.is_valid(schema, value)


NOT_ZONES = ["0", "utc", "localtime", "Mars/Olympus", "Europe/", "Europe", "Europe/Berlin/x"]


def test_the_timezone_schema_admits_exactly_the_accepted_names() -> None:
    schema = SCHEMAS["CrontabSchedule"]["properties"]["timezone"]
    for name in timezones():
        assert admits(schema, name), name
        assert CrontabSchedule(kind="crontab", timezone=name).timezone == name
    for name in NOT_ZONES:
        assert not admits(schema, name), name
        with pytest.raises(ValidationError, match="IANA timezone name"):
            CrontabSchedule(kind="crontab", timezone=name)


def test_the_timezone_list_is_sorted_and_every_name_loads() -> None:
    names = timezones()
    assert list(names) == sorted(set(names))
    assert {"UTC", "Europe/Berlin", "America/Argentina/Buenos_Aires", "Etc/GMT+5"} <= set(names)
    assert "localtime" not in names  # the machine's own zone: not a name that means one thing
    for name in names:
        zoneinfo.ZoneInfo(name)  # from the system's tz data or the tzdata package


URL_FIELDS = [("EndpointCreate", "url"), ("TaskCreate", "notify"), ("JobCreate", "notify")]
GOOD_URLS = [
    "http://127.0.0.1:8000/hook",
    "https://example.com",
    "https://example.com?x=1",
    "http://[::1]:80/a@b",
    "http://h:65535",
]
BAD_URLS = [
    "https://",
    "http://:80/",
    "http://user@example.com/",
    "http://user:pw@example.com/",
    "http://example.com/#part",
    "http://example.com:65536/",
    "http://example.com:x/",
    "ftp://example.com/",
    "http://exa mple.com/",  # parses, but no such host can resolve
]


@pytest.mark.parametrize("url", GOOD_URLS + BAD_URLS)
def test_a_url_the_schema_admits_is_one_the_gateway_can_push_to(url: str) -> None:
    """Whether the host resolves to an allowed address depends on the world (SSRF checks);
    the rest of what makes an endpoint or notify URL usable, the schema says."""
    for model, field in [
        ("EndpointCreate", "url"),
        ("TaskCreate", "notify"),
        ("JobCreate", "notify"),
    ]:
        schema = SCHEMAS[model]["properties"][field]["anyOf"][0]
        assert admits(schema, url) == (url in GOOD_URLS), (model, url)
    if url in GOOD_URLS:
        parse_endpoint_url(url)


def test_an_endpoint_task_list_is_unique_and_names_both_places_of_a_repeated_name() -> None:
    assert SCHEMAS["EndpointTasks"]["properties"]["tasks"]["uniqueItems"] is True
    tasks = [{"name": "a", "schema": {}}, {"name": "b", "schema": {}}, {"name": "a", "schema": {}}]
    with pytest.raises(ValidationError) as refused:
        EndpointTasks.model_validate({"tasks": tasks})
    error = refused.value.errors()[0]
    assert error["loc"] == ("tasks",)
    assert error["msg"] == "task name 'a' is listed twice: tasks.0.name and tasks.2.name"


@pytest.mark.parametrize(
    ("section", "given", "low", "high"),
    [
        ("backoff", {"max_delay": 0.5}, "base_delay", "max_delay"),
        ("circuit_breaker", {"max_open_for": 1}, "open_for", "max_open_for"),
    ],
)
def test_a_rule_between_two_fields_is_in_the_description_and_refused_plainly(
    section: str, given: dict[str, Any], low: str, high: str
) -> None:
    """JSON Schema cannot compare two fields: the description says it (a field left out takes
    its default, in a PATCH too), and the refusal states the rule without pydantic's prefix."""
    rule = f"{high} must be at least {low}"
    assert rule in SCHEMAS["QueuePolicyPatch"]["properties"][section]["description"]
    with pytest.raises(ValidationError) as refused:
        QueuePolicyPatch.model_validate({section: given})
    assert refused.value.errors()[0]["msg"] == rule
