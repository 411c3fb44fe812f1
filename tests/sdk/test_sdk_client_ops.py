"""The operator methods of the clients against a mocked gateway (respx): what each sends, and
how its answer is read. Both clients execute the same request specs (``sdk.api_ops``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import httpx
import pytest
import respx

from sdk import ApiError, AsyncClient, Client, TaskState
from sdk.wire import DeadLetterFilter

URL = "http://gateway.test"
KEY = "jg_secret_key"
ID1 = "01J00000000000000000000001"
ID2 = "01J00000000000000000000002"
NOW = "2030-01-01T00:00:00Z"


def dead_json(task_id: str = ID1) -> dict[str, Any]:
    attempt = {"number": 1, "started_at": NOW, "ended_at": NOW, "outcome": "failed"}
    return {
        "id": task_id,
        "queue": "emails",
        "name": "send",
        "state": "dead",
        "version": "v2",
        "max_attempts": 1,
        "attempt": 1,
        "created_at": NOW,
        "run_at": NOW,
        "finished_at": NOW,
        "error": "boom",
        "attempts": [attempt],
    }


def running_json(**fields: Any) -> dict[str, Any]:
    task = {
        "id": ID1,
        "queue": "emails",
        "name": "send",
        "attempt": 2,
        "endpoint_id": "ep1",
        "endpoint_url": "http://worker.test/",
        "started_at": NOW,
        "elapsed": 12.5,
        "progress": 0.25,
        "stalled": True,
    }
    return task | fields


@pytest.fixture
def gw() -> Iterator[respx.MockRouter]:
    with respx.mock(base_url=URL, assert_all_called=False) as router:
        yield router


@pytest.fixture
def client() -> Iterator[Client]:
    with Client(URL, KEY, timeout=5.0, transport=httpx.HTTPTransport()) as client:
        yield client


def params(route: respx.Route) -> dict[str, str]:
    return dict(route.calls.last.request.url.params)


def sent(route: respx.Route) -> Any:
    return json.loads(route.calls.last.request.content)


# --- dead letters -------------------------------------------------------------------------------


def test_dead_letters_sends_only_the_given_filters(gw: respx.MockRouter, client: Client) -> None:
    route = gw.get("/v1/deadletters").respond(
        200, json={"items": [dead_json()], "next_cursor": "c2"}
    )
    page = client.dead_letters()
    assert params(route) == {"limit": "100"}
    assert route.calls.last.request.headers["authorization"] == f"Bearer {KEY}"
    assert page.next_cursor == "c2"
    (task,) = page.items
    assert (task.state, task.version, task.error) == (TaskState.DEAD, "v2", "boom")
    assert [a.outcome for a in task.attempts] == ["failed"]


def test_dead_letters_times_are_sent_as_rfc3339_utc(gw: respx.MockRouter, client: Client) -> None:
    route = gw.get("/v1/deadletters").respond(200, json={"items": []})
    paris = timezone(timedelta(hours=2))
    client.dead_letters(
        queue="emails",
        name="send",
        version="v2",
        owner="acme",
        since=datetime(2030, 1, 1, 2, 0, tzinfo=paris),
        until="2030-01-02T00:00:00+01:00",
        limit=5,
        cursor="c1",
    )
    assert params(route) == {
        "queue": "emails",
        "name": "send",
        "version": "v2",
        "owner": "acme",
        "since": "2030-01-01T00:00:00Z",
        "until": "2030-01-02T00:00:00+01:00",  # a string goes as given
        "limit": "5",
        "cursor": "c1",
    }
    # '+' must be escaped in a query, or the server would read a space.
    assert "%2B01%3A00" in str(route.calls.last.request.url)


def test_dead_letters_refuses_a_naive_time(gw: respx.MockRouter, client: Client) -> None:
    with pytest.raises(ValueError, match="since needs a timezone"):
        client.dead_letters(since=datetime(2030, 1, 1))
    assert not gw.calls


def test_resubmit_by_ids(gw: respx.MockRouter, client: Client) -> None:
    route = gw.post("/v1/deadletters/resubmit").respond(
        200,
        json={"resubmitted": [ID1], "skipped": [{"id": ID2, "reason": "not dead (succeeded)"}]},
    )
    result = client.resubmit([ID1, ID2.lower()])
    assert sent(route) == {"ids": [ID1, ID2], "limit": 1000, "reset_attempts": True}
    assert result.resubmitted == [ID1]
    assert [(s.id, s.reason) for s in result.skipped] == [(ID2, "not dead (succeeded)")]


def test_resubmit_one_id_given_as_a_string(gw: respx.MockRouter, client: Client) -> None:
    route = gw.post("/v1/deadletters/resubmit").respond(200, json={"resubmitted": [ID1]})
    assert client.resubmit(ID1).skipped == []
    assert sent(route)["ids"] == [ID1]


@pytest.mark.parametrize(
    "given",
    [{"queue": "emails", "since": "2030-01-01T00:00:00Z"}, None],
    ids=["dict", "model"],
)
def test_resubmit_by_filter(
    gw: respx.MockRouter, client: Client, given: dict[str, Any] | None
) -> None:
    route = gw.post("/v1/deadletters/resubmit").respond(200, json={"resubmitted": []})
    chosen = given or DeadLetterFilter(queue="emails", since=datetime(2030, 1, 1, tzinfo=UTC))
    client.resubmit(filter=chosen, limit=10, reset_attempts=False)
    assert sent(route) == {
        "filter": {"queue": "emails", "since": "2030-01-01T00:00:00Z"},
        "limit": 10,
        "reset_attempts": False,
    }


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "either ids or filter"),
        ({"ids": [ID1], "filter": {"queue": "emails"}}, "either ids or filter"),
        ({"ids": ["not-a-ulid"]}, "ULID"),
        ({"filter": {"queue": "no spaces"}}, "queue"),
        ({"filter": {"colour": "red"}}, "colour"),
        ({"ids": [ID1], "limit": 0}, "limit"),
    ],
)
def test_resubmit_is_validated_before_sending(
    gw: respx.MockRouter, client: Client, kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        client.resubmit(**kwargs)
    assert not gw.calls


# --- scheduled, running -------------------------------------------------------------------------


def test_scheduled_pages(gw: respx.MockRouter, client: Client) -> None:
    item = {"id": ID1, "name": "send", "due_at": NOW, "kind": "retry", "attempt": 2, "error": "x"}
    route = gw.get("/v1/queues/a%2Fb/scheduled").respond(
        200, json={"items": [item], "next_cursor": None}
    )
    page = client.scheduled("a/b", limit=20, cursor="c1")
    assert params(route) == {"limit": "20", "cursor": "c1"}
    (task,) = page.items
    assert (task.kind, task.attempt, task.error) == ("retry", 2, "x")
    assert task.due_at == datetime(2030, 1, 1, tzinfo=UTC)


def test_running_filters_and_parsing(gw: respx.MockRouter, client: Client) -> None:
    route = gw.get("/v1/running").respond(200, json={"items": [running_json()], "truncated": True})
    listed = client.running()
    assert params(route) == {"limit": "500"}
    assert listed.truncated
    (task,) = listed.items
    assert (task.elapsed, task.progress, task.stalled) == (12.5, 0.25, True)
    client.running(queue="emails", owner="acme", limit=3)
    assert params(route) == {"queue": "emails", "owner": "acme", "limit": "3"}


def test_list_tasks_sends_the_owner_filter(gw: respx.MockRouter, client: Client) -> None:
    route = gw.get("/v1/queues/emails/tasks").respond(200, json={"items": []})
    client.list_tasks("emails", TaskState.QUEUED, owner="acme")
    assert params(route) == {"state": "queued", "owner": "acme"}


# --- clean --------------------------------------------------------------------------------------


def test_clean_defaults_to_every_finished_state(gw: respx.MockRouter, client: Client) -> None:
    route = gw.post("/v1/queues/emails/clean").respond(200, json={"deleted": 7})
    assert client.clean("emails").deleted == 7
    assert sent(route) == {
        "states": ["succeeded", "failed", "dead", "cancelled"],
        "older_than": 0.0,
        "limit": 10_000,
    }


def test_clean_with_every_option(gw: respx.MockRouter, client: Client) -> None:
    route = gw.post("/v1/queues/emails/clean").respond(200, json={"deleted": 0})
    client.clean(
        "emails", states=["dead", TaskState.FAILED], name="send", older_than=timedelta(days=7)
    )
    assert sent(route) == {
        "states": ["dead", "failed"],
        "name": "send",
        "older_than": 604_800.0,
        "limit": 10_000,
    }


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"states": ["queued"]}, "finished states"),
        ({"states": ["gone"]}, "gone"),
        ({"states": []}, "states"),
        ({"older_than": -1}, "older_than"),
        ({"limit": 0}, "limit"),
    ],
)
def test_clean_is_validated_before_sending(
    gw: respx.MockRouter, client: Client, kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        client.clean("emails", **kwargs)
    assert not gw.calls


def test_operator_errors_are_api_errors(gw: respx.MockRouter, client: Client) -> None:
    gw.post("/v1/queues/nope/clean").respond(
        404, json={"title": "Not Found", "status": 404, "detail": "no queue 'nope'"}
    )
    with pytest.raises(ApiError, match="no queue 'nope'") as caught:
        client.clean("nope")
    assert caught.value.status == 404


# --- the async twin -----------------------------------------------------------------------------


async def test_async_client_has_the_same_operator_methods(gw: respx.MockRouter) -> None:
    dead = gw.get("/v1/deadletters").respond(200, json={"items": [dead_json()]})
    resubmitted = gw.post("/v1/deadletters/resubmit").respond(200, json={"resubmitted": [ID1]})
    scheduled = gw.get("/v1/queues/emails/scheduled").respond(200, json={"items": []})
    running = gw.get("/v1/running").respond(200, json={"items": [running_json()]})
    cleaned = gw.post("/v1/queues/emails/clean").respond(200, json={"deleted": 3})
    listed = gw.get("/v1/queues/emails/tasks").respond(200, json={"items": []})
    async with AsyncClient(URL, KEY, transport=httpx.AsyncHTTPTransport()) as client:
        page = await client.dead_letters(queue="emails", limit=1)
        result = await client.resubmit(filter={"queue": "emails"}, limit=5)
        await client.scheduled("emails", limit=10)
        running_list = await client.running(queue="emails")
        clean = await client.clean("emails", states=["dead"], older_than=60)
        await client.list_tasks("emails", owner="acme")
    assert [t.id for t in page.items] == [ID1]
    assert params(dead) == {"queue": "emails", "limit": "1"}
    assert result.resubmitted == [ID1]
    assert sent(resubmitted) == {"filter": {"queue": "emails"}, "limit": 5, "reset_attempts": True}
    assert params(scheduled) == {"limit": "10"}
    assert running_list.items[0].stalled
    assert params(running) == {"queue": "emails", "limit": "500"}
    assert clean.deleted == 3
    assert sent(cleaned) == {"states": ["dead"], "older_than": 60.0, "limit": 10_000}
    assert params(listed) == {"owner": "acme"}
