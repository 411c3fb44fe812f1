"""Where JSON Schema can say a rule, openapi.yaml says it: a value the schema admits is one the
models accept, and one they refuse the schema refuses too (the Schemathesis contract run checks
the same with generated requests; these pin the cases that once disagreed)."""

from __future__ import annotations

import functools
import json
import random
import zoneinfo
from typing import Any

import jsonschema_rs
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from gateway.api.openapi import build_openapi
from gateway.core.backoff import compute_backoff
from gateway.jobs.schedule import CRON_FIELDS, cron_trigger
from gateway.security.ssrf import parse_endpoint_url
from sdk.wire import (
    Backoff,
    BackoffStrategy,
    CrontabSchedule,
    EndpointCreate,
    EndpointTasks,
    QueuePolicyPatch,
    TaskCreate,
)
from sdk.wire.timezones import timezones

SCHEMAS = build_openapi()["components"]["schemas"]
ULID_A = "01J0000000000000000000000A"
DEBOUNCE = {"key": "k", "window": 5}


def admits(schema: dict[str, Any], value: Any) -> bool:
    return _validator(json.dumps(schema, sort_keys=True)).is_valid(value)


@functools.cache
def _validator(schema: str) -> Any:
    """A schema compiled once (compiling the timezone names' schema for each of its 600 names
    was most of this module's time)."""
    return jsonschema_rs.validator_for(json.loads(schema))


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
    "http://[::ffff:10.0.0.1]:8080/",
    "http://[fe80::1:2]/x?y=%20",
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
    "https://[7]/",  # not an IPv6 address: urlsplit refuses it
    "http://[1::2::3]/",
    "http://h/\u0085",  # whitespace to Rust's regex (pydantic's), not to ECMAScript's
    "http://h\u00e9.com/",  # non-ASCII travels percent-encoded
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


def model_admits(model: str, value: Any) -> bool:
    """Whether openapi.yaml's schema of ``model`` (its $refs resolved) admits ``value``."""
    document = {"$ref": f"#/components/schemas/{model}", "components": {"schemas": SCHEMAS}}
    return admits(document, value)


def test_an_endpoint_task_list_may_repeat_a_name_for_the_gateway_to_answer_409() -> None:
    """Unique by name is not a rule JSON Schema can state (uniqueItems compares whole
    entries): the schema and the model admit a repeat, and the gateway answers it with its
    own 409 (tests/integration/test_catalog.py), which openapi.yaml declares."""
    tasks = [{"name": "a", "schema": {}}, {"name": "b", "schema": {}}, {"name": "a", "schema": {}}]
    for body in ({"tasks": tasks}, {"tasks": [tasks[0], tasks[0]]}):
        assert model_admits("EndpointTasks", body)
        EndpointTasks.model_validate(body)
    paths = build_openapi()["paths"]
    for path, method in [
        ("/v1/queues/{queue}/endpoints", "post"),
        ("/v1/queues/{queue}/endpoints/{endpoint_id}/tasks", "put"),
    ]:
        conflict = paths[path][method]["responses"]["409"]["description"]
        assert "tag:jobgate.dev,2026:problem/duplicate-task-name" in conflict, path


@pytest.mark.parametrize(
    ("section", "given", "cap"),
    [
        ("backoff", {"base_delay": 10, "max_delay": 0.5}, "max_delay"),
        ("circuit_breaker", {"open_for": 10, "max_open_for": 1}, "max_open_for"),
    ],
)
def test_a_cap_below_its_start_is_taken_and_wins(
    section: str, given: dict[str, Any], cap: str
) -> None:
    """JSON Schema cannot compare two fields, so the schema admits a cap below the value it
    caps: the gateway takes it, and the cap wins (every delay, or every pause, is the cap)."""
    assert model_admits("QueuePolicyPatch", {section: given})
    patch = QueuePolicyPatch.model_validate({section: given})
    assert getattr(getattr(patch, section), cap) == given[cap]
    assert model_admits(
        "TaskCreate", {"name": "t", "debounce": {"key": "k", "window": 9, "max_wait": 1}}
    )


def test_a_backoff_capped_below_its_base_waits_the_cap() -> None:
    backoff = Backoff(strategy=BackoffStrategy.CONSTANT, base_delay=10, max_delay=0.5)
    assert [compute_backoff(n, backoff, random.Random(1)) for n in (1, 2, 5)] == [0.5] * 3


TASK_BODIES = [
    ({"name": "t", "pass_results": True}, False),
    ({"name": "t", "pass_results": True, "depends_on": []}, False),
    ({"name": "t", "pass_results": True, "depends_on": [ULID_A]}, True),
    ({"name": "t", "pass_results": False}, True),
    ({"name": "t", "pass_results": None}, True),
    ({"name": "t", "debounce": DEBOUNCE, "depends_on": [ULID_A]}, False),
    ({"name": "t", "debounce": DEBOUNCE, "group": "g"}, False),
    ({"name": "t", "debounce": DEBOUNCE, "delay": 0}, False),
    ({"name": "t", "debounce": DEBOUNCE, "throttle": {"key": "k", "window": 1}}, False),
    ({"name": "t", "debounce": DEBOUNCE, "group": None, "depends_on": [], "id": None}, True),
    ({"name": "t", "debounce": None, "group": "g", "depends_on": [ULID_A]}, True),
    ({"name": "t", "delay": 1, "run_at": "2030-01-01T00:00:00Z"}, False),
]


@pytest.mark.parametrize(("body", "taken"), TASK_BODIES)
def test_a_task_body_the_schema_admits_is_one_the_model_takes(
    body: dict[str, Any], taken: bool
) -> None:
    """pass_results needs depends_on, and a debounce comes with none of the options it cannot
    be combined with: both rules are in the schema, so no body it admits is refused."""
    assert model_admits("TaskCreate", body) is taken
    assert model_admits("BatchCreate", {"tasks": [body]}) is taken
    if taken:
        TaskCreate.model_validate(body)
    else:
        with pytest.raises(ValidationError):
            TaskCreate.model_validate(body)


@pytest.mark.parametrize(
    ("body", "taken"),
    [
        ({"url": "http://127.0.0.1:8000/"}, True),
        ({"url": "http://127.0.0.1:8000/", "pull": False}, True),
        ({"pull": True}, True),
        ({"pull": True, "url": None}, True),
        ({}, False),
        ({"url": None}, False),
        ({"pull": False}, False),
        ({"pull": True, "url": "http://127.0.0.1:8000/"}, False),
    ],
)
def test_an_endpoint_has_a_url_unless_it_is_a_pull_one(body: dict[str, Any], taken: bool) -> None:
    """The gateway's check (services/queues.py) is in the schema: a url, or pull and none."""
    assert model_admits("EndpointCreate", body) is taken


CRON_SCHEMAS = SCHEMAS["CrontabSchedule"]["properties"]


@pytest.mark.parametrize(
    ("field", "value", "taken"),
    [
        ("month_of_year", "0" * 99, False),  # below the range, however it is written
        ("day_of_month", "00", False),
        ("minute", "60", False),
        ("hour", "24", False),
        ("day_of_week", "8", False),
        ("minute", "*/0", False),
        ("minute", "0005", True),  # zero-padded, in range
        ("month_of_year", "0" * 98 + "1", True),
        ("hour", "22-2", True),  # wraps around midnight
        ("minute", "*/90", True),  # a step past the range: the first value only
        ("minute", "50-59/20", True),
        ("day_of_week", "fri-MON,7", True),
        ("month_of_year", "nov-feb/2", True),
        ("day_of_month", "last fri, 1st mon,last,1-31/7", True),
        ("minute", "1,,2", False),
        ("minute", " 1 , 2 ", True),  # spaces around commas and ends, as crontab(5) reads
        ("minute", "1 2", False),
    ],
)
def test_a_crontab_field_the_schema_admits_is_one_the_gateway_takes(
    field: str, value: str, taken: bool
) -> None:
    assert admits(CRON_SCHEMAS[field], value) is taken
    if taken:
        cron_trigger(CrontabSchedule.model_validate({"kind": "crontab", field: value}))
    else:
        with pytest.raises(ValidationError, match=field):
            CrontabSchedule.model_validate({"kind": "crontab", field: value})


# Examples per run: the suite's budget (drawing from these regexes is slow: 40 a field took 6 s
# of CPU each); each run draws others.
@pytest.mark.parametrize("field", CRON_FIELDS)
@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_every_crontab_field_the_pattern_admits_makes_a_trigger(field: str, data: Any) -> None:
    value = data.draw(st.from_regex(CRON_SCHEMAS[field]["pattern"], fullmatch=True))
    assume(len(value) <= 100)
    cron_trigger(CrontabSchedule.model_validate({"kind": "crontab", field: value}))


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_every_url_the_pattern_admits_parses_and_validates(data: Any) -> None:
    schema = SCHEMAS["EndpointCreate"]["properties"]["url"]["anyOf"][0]
    url = data.draw(st.from_regex(schema["pattern"], fullmatch=True))
    assume(8 <= len(url) <= 2048)
    parse_endpoint_url(url)
    EndpointCreate.model_validate({"url": url})
