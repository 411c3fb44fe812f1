"""One durable HTTP call made against a loopback service (gateway/dispatch/http_call.py;
docs/durable.md, "A durable HTTP call"): the answer's shape, redirects followed by hand and
each checked by the SSRF rules, the caps, the tries on connection errors, the timeout."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator, Iterator
from typing import Any
from urllib.parse import quote

import aiohttp
import pytest

from gateway.dispatch.http_call import MAX_REDIRECTS, TRIES, make_call
from gateway.dispatch.pusher import new_session
from sdk.wire import CallIn
from tests.call_service import CallService


@pytest.fixture
def service() -> Iterator[CallService]:
    with CallService() as service:
        yield service


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with new_session(allow_private=True) as session:
        yield session


async def call(
    session: aiohttp.ClientSession,
    url: str,
    *,
    max_body: int = 1024,
    allow_private: bool = True,
    **fields: Any,
) -> Any:
    request = CallIn.model_validate({"step": "s", "url": url, "timeout": 5, **fields})
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    found = await make_call(
        session, request, "t:s", max_body=max_body, allow_private=allow_private, sleep=sleep
    )
    assert found is not None
    result = json.loads(found)
    if "kind" in result:
        result["slept"] = slept
    return result


async def test_an_answer_is_status_headers_and_body(
    service: CallService, session: aiohttp.ClientSession
) -> None:
    found = await call(session, service.url + "/echo", method="PUT", body="hello")
    assert found["status"] == 200
    assert found["headers"]["content-type"] == "application/json"
    assert found["body"] == {"n": 1, "method": "PUT", "key": "t:s", "body": "hello"}
    text = await call(session, service.url + "/status/503")
    assert (text["status"], text["body"]) == (503, "status")  # not retried: the task decides
    assert service.count("/status/503") == 1
    head = await call(session, service.url + "/echo", method="HEAD")
    assert (head["status"], head["body"]) == (200, "")
    # NaN is not JSON: kept as text, so the recorded step stays JSON every reader parses
    nan = await call(session, service.url + "/nan")
    assert nan["body"] == '{"x": NaN}'


async def test_redirects_are_followed_by_hand_each_checked(
    service: CallService, session: aiohttp.ClientSession
) -> None:
    to = service.url + "/echo"
    found = await call(session, f"{service.url}/redirect?to={to}", method="POST", json={"a": 1})
    assert found["body"]["method"] == "GET"  # a 302 after a POST becomes a GET, no body
    assert found["body"]["key"] == "t:s"
    kept = await call(session, f"{service.url}/redirect?to={to}&status=307", method="POST", json=1)
    assert (kept["body"]["method"], kept["body"]["body"]) == ("POST", "1")
    metadata = "http://169.254.169.254/latest/meta-data"
    refused = await call(session, f"{service.url}/redirect?to={metadata}")
    assert refused["kind"] == "refused"
    assert "link-local" in refused["error"]
    loop = f"{service.url}/redirect?to={service.url}/redirect?to=/echo"
    assert (await call(session, loop))["status"] == 200
    chain = "/echo"
    for _ in range(MAX_REDIRECTS + 1):
        chain = "/redirect?to=" + quote(chain, safe="")
    before = service.count("/redirect")
    too_many = await call(session, service.url + chain)
    assert too_many["kind"] == "redirects"
    assert service.count("/redirect") - before == MAX_REDIRECTS + 1


async def test_loopback_is_refused_unless_private_addresses_are_allowed(
    service: CallService, session: aiohttp.ClientSession
) -> None:
    found = await call(session, service.url + "/echo", allow_private=False)
    assert found["kind"] == "refused"
    assert service.count() == 0


async def test_an_answer_over_the_cap_is_too_large(
    service: CallService, session: aiohttp.ClientSession
) -> None:
    assert (await call(session, service.url + "/big?n=1024"))["status"] == 200
    found = await call(session, service.url + "/big?n=1025")
    assert found["kind"] == "too_large"
    assert "1024 bytes" in found["error"]


async def test_connection_errors_are_tried_three_times_then_fail(
    session: aiohttp.ClientSession,
) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there
    found = await call(session, f"http://127.0.0.1:{port}/x")
    assert found["kind"] == "unreachable"
    assert f"({TRIES} tries)" in found["error"]
    assert found["slept"] == [1.0, 2.0]


async def test_a_try_ends_at_the_timeout_and_is_not_tried_again(
    service: CallService, session: aiohttp.ClientSession
) -> None:
    found = await call(session, service.url + "/slow?s=3", timeout=0.3)
    assert found["kind"] == "timed_out"
    assert service.count() == 1


def test_the_request_is_checked_strictly() -> None:
    good = {"step": "s", "url": "https://api.example.com/x", "timeout": 900}
    assert CallIn.model_validate(good).method == "GET"
    for bad in (
        {"url": "ftp://x"},
        {"url": "http://"},
        {"timeout": 901},
        {"timeout": 0},
        {"method": "TRACE"},
        {"headers": {"Host": "x"}},
        {"headers": {"Idempotency-Key": "x"}},
        {"headers": {"Connection": "close"}},
        {"headers": {"X-A": "a\r\nB: c"}},
        {"headers": {f"X-{n}": "v" for n in range(33)}},
        {"json": {"a": 1}, "body": "x"},
        {"extra": 1},
    ):
        with pytest.raises(ValueError):  # noqa: PT011 (each body's reason differs)
            CallIn.model_validate({**good, **bad})
