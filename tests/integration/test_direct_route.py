"""Single enqueues skip Starlette's router (gateway/api/direct.py) and answer exactly as through
it: each request below is sent once through the direct route and once with it stood aside."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from urllib.parse import unquote

import httpx
import pytest
from starlette.types import Receive, Scope, Send

from gateway.api.direct import DirectRoute
from gateway.settings import ApiKey, Settings
from tests.support import gateway_client

ADMIN = "admin-key-0123456789"
OTHER = "other-queue-key-0123456789"
TASKS = "/v1/queues/q/tasks"
MINIMAL = "return=minimal"
BIG = json.dumps({"name": "x", "payload": "a" * 2000})

REQUESTS: list[tuple[str, str, dict[str, str], bytes | None]] = [
    ("POST", TASKS, {}, b'{"name": "x", "payload": {"n": 1}}'),
    ("POST", TASKS, {}, b'{"name": "x", "dedup_key": "same-@"}'),
    ("POST", TASKS, {}, b'{"name": "x", "dedup_key": "same-@"}'),
    ("POST", TASKS + "?wait=0", {}, b'{"name": "x"}'),
    ("POST", TASKS + "?wait=-1", {}, b'{"name": "x"}'),
    ("POST", TASKS, {"authorization": ""}, b'{"name": "x"}'),
    ("POST", TASKS, {"authorization": "Bearer nope-nope-nope-nope"}, b'{"name": "x"}'),
    ("POST", TASKS, {"authorization": f"Bearer {OTHER}"}, b'{"name": "x"}'),
    ("POST", "/v1/queues/nope/tasks", {}, b'{"name": "x"}'),
    ("POST", "/v1/queues/b%40d/tasks", {}, b'{"name": "x"}'),
    ("POST", TASKS, {"content-type": "text/plain"}, b'{"name": "x"}'),
    ("POST", TASKS, {}, b""),
    ("POST", TASKS, {}, b'{"name": '),
    ("POST", TASKS, {}, b'{"name": "x", "payload": NaN}'),
    ("POST", TASKS, {}, b'{"name": "x", "priority": true, "delay": "5", "extra": 1}'),
    ("POST", TASKS, {}, b'{"name": "x", "depends_on": ["01ARZ3NDEKTSV4RRFFQ69G5FAV"]}'),
    ("POST", TASKS, {}, BIG.encode()),
    ("POST", TASKS, {"idempotency-key": "k1"}, b'{"name": "x"}'),
    ("POST", TASKS, {"idempotency-key": "k1"}, b'{"name": "x"}'),
    ("POST", TASKS, {"idempotency-key": "k1"}, b'{"name": "y"}'),
    ("POST", TASKS, {"idempotency-key": "k2", "prefer": MINIMAL}, b'{"name": "x"}'),
    ("POST", TASKS, {"idempotency-key": "k2"}, b'{"name": "x"}'),
    ("POST", TASKS, {"prefer": MINIMAL}, b'{"name": "x", "payload": {"n": 1}}'),
    ("POST", TASKS, {"prefer": MINIMAL}, b'{"name": "x", "dedup_key": "same-@"}'),
    ("POST", TASKS + "?wait=0", {"prefer": "respond-async, return=minimal"}, b'{"name": "x"}'),
    ("POST", TASKS, {"prefer": "return=representation"}, b'{"name": "x"}'),
    ("POST", TASKS, {"prefer": MINIMAL}, b'{"name": "x", "priority": true}'),
    ("POST", TASKS, {"prefer": MINIMAL, "authorization": ""}, b'{"name": "x"}'),
    ("POST", "/v1/queues/nope/tasks", {"prefer": MINIMAL}, b'{"name": "x"}'),
    ("POST", TASKS, {"prefer": MINIMAL}, BIG.encode()),
    ("POST", TASKS + "/", {}, b'{"name": "x"}'),
    ("POST", TASKS, {}, b'{"name": "x", "payload": 1, "debounce": {"key": "d-@", "window": 60}}'),
    ("POST", TASKS, {}, b'{"name": "x", "payload": 2, "debounce": {"key": "d-@", "window": 60}}'),
    ("POST", TASKS, {}, b'{"name": "x", "delay": 1, "debounce": {"key": "d-@", "window": 60}}'),
    ("POST", TASKS, {}, b'{"name": "x", "debounce": {"key": "d-@", "window": 0}}'),
    ("POST", TASKS, {}, b'{"name": "x", "throttle": {"key": "t-@", "window": 60}}'),
    ("POST", TASKS, {}, b'{"name": "x", "throttle": {"key": "t-@", "window": 60}}'),
    ("POST", TASKS, {}, b'{"name": "x", "throttle": {"key": "t-@", "window": 60, "mode": "q"}}'),
    ("GET", "/v1/queues/nope/tasks", {}, None),
    ("PUT", TASKS, {}, b"{}"),
]
_VARYING = re.compile(r'"(id|created_at|run_at)":"[^"]*"')


@pytest.fixture
async def api(redis_url: str) -> AsyncIterator[httpx.AsyncClient]:
    settings = Settings(
        redis_url=redis_url,
        max_body_bytes=1024,
        api_keys=[
            ApiKey(key=ADMIN, scopes=["admin"]),
            ApiKey(key=OTHER, scopes=["enqueue:other"]),
        ],
    )
    async with gateway_client(settings, ADMIN) as client:
        assert (await client.put("/v1/queues/q", json={})).status_code == 201
        yield client


async def answers(api: httpx.AsyncClient, suffix: str) -> list[tuple[int, dict[str, str], str]]:
    found = []
    for method, path, headers, body in REQUESTS:
        if "idempotency-key" in headers:  # each pass its own keys
            headers = {**headers, "idempotency-key": headers["idempotency-key"] + suffix}
        if body is not None:
            body = body.replace(b"@", suffix.encode())
        response = await api.request(method, path, headers=headers, content=body)
        shown = {k: v for k, v in response.headers.items() if k != "content-length"}
        found.append(
            (
                response.status_code,
                shown,
                _VARYING.sub(r'"\1":"…"', response.text.replace(suffix, "@")),
            )
        )
    return found


async def test_the_direct_route_answers_as_the_router_does(
    api: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    taken = []
    answer = DirectRoute._answer

    async def counted(self: DirectRoute, scope: Scope, receive: Receive, send: Send) -> None:
        taken.append(scope["path"])
        await answer(self, scope, receive, send)

    monkeypatch.setattr(DirectRoute, "_answer", counted)
    direct = await answers(api, "direct")
    single_enqueues = [
        unquote(path.partition("?")[0])
        for method, path, _, _ in REQUESTS
        if method == "POST" and re.fullmatch(r"/v1/queues/[^/]+/tasks", path.partition("?")[0])
    ]
    assert taken == single_enqueues

    async def stand_aside(self: DirectRoute, scope: Scope, receive: Receive, send: Send) -> None:
        await self._app(scope, receive, send)

    monkeypatch.setattr(DirectRoute, "__call__", stand_aside)
    routed = await answers(api, "routed")
    assert taken == single_enqueues  # none more: the router answered
    assert [status for status, _, _ in direct] == [
        *(201, 201, 200, 201, 422, 401, 401, 403, 404, 422, 415, 400),
        *(400, 400, 422, 422, 413, 201, 200, 409),  # k1 with another body: 409
        *(201, 200, 201, 200, 201, 201, 422, 401, 404, 413),
        *(307, 201, 200, 422, 422, 201, 200, 422, 404, 405),
    ]
    applied = [headers.get("preference-applied") for _, headers, _ in direct]
    assert applied[20:26] == [MINIMAL, MINIMAL, MINIMAL, MINIMAL, MINIMAL, None]
    receipt = {"id": "…", "state": "queued", "deduplicated": True, "flow": None}
    assert json.loads(direct[23][2]) == receipt
    for one, other in zip(direct, routed, strict=True):
        assert one == other
