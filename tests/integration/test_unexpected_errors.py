"""An exception no handler but the catch-all takes (a bug: nothing the gateway knows) is
answered 500 by the app itself, through the direct enqueue route and through the router, and
logged once with its traceback. It does not go on past the app to the server: uvicorn closes
the client's connection after answering a request whose exception reached it, so a producer
that has just sent its next request on that keep-alive connection loses it without an answer
(tests/cluster/test_cluster_failover_load.py). Here the app runs in-process: an exception that
escaped it would be raised by httpx's ASGI transport instead of an answer.

The bug is made by replacing a store method: no real failure is left that the gateway does not
know (what the store met at a cluster failover is tests/cluster/'s)."""

from __future__ import annotations

import logging

import pytest

from gateway.settings import ApiKey, Settings
from gateway.store.queues import QueueStore
from gateway.store.tasks.enqueue import Enqueuing
from tests.support import gateway_app

ADMIN = "admin-key-0123456789"


async def a_bug(*args: object, **kwargs: object) -> None:
    raise RuntimeError("a bug")


async def test_an_unknown_error_is_answered_500_by_the_app(
    redis_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    settings = Settings(redis_url=redis_url, api_keys=[ApiKey(key=ADMIN, scopes=["admin"])])
    async with gateway_app(settings, ADMIN) as (api, _):
        assert (await api.put("/v1/queues/q", json={})).status_code == 201
        assert (await api.post("/v1/queues/q/tasks", json={"name": "x"})).status_code == 201
        monkeypatch.setattr(Enqueuing, "enqueue_batch", a_bug)
        monkeypatch.setattr(QueueStore, "get", a_bug)
        caplog.set_level(logging.WARNING)
        enqueued = await api.post("/v1/queues/q/tasks", json={"name": "x"})  # the direct route
        read = await api.get("/v1/queues/q")  # the router

    for answer in (enqueued, read):
        assert answer.status_code == 500, answer.text
        assert answer.headers["content-type"] == "application/problem+json"
        assert answer.json()["detail"] == "the gateway failed; the error is logged"
    logged = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.getMessage() for r in logged] == [
        "unhandled error in POST /v1/queues/q/tasks",
        "unhandled error in GET /v1/queues/q",
    ]
    assert all(r.exc_info and str(r.exc_info[1]) == "a bug" for r in logged)
