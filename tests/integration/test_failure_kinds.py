"""The failure kind of each way an attempt can fail, as a real gateway records it from a scripted
worker over loopback HTTP (the redrive policy filters dead tasks on it), and the redrive policy
through the API: validation naming the fields, PATCH and its removal.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from sdk.wire import ErrorIn, PushBody
from tests.support import free_port, live_gateway, serve, until

ADMIN = "admin-key-0123456789"
RAISED = ErrorIn(error="ValueError: bad", traceback="Traceback ...", retryable=True)


@dataclass
class Worker:
    """Answers each push as ``ANSWERS[task name]`` says (signatures are not checked here: the
    dispatch tests do that). ``hang`` never answers until the test ends."""

    callbacks: dict[str, tuple[str, str]] = field(default_factory=dict)  # id → (url, lease)
    released: asyncio.Event = field(default_factory=asyncio.Event)

    async def handle(self, request: Request) -> Response:
        push = PushBody.model_validate_json(await request.body())
        self.callbacks[push.id] = (
            request.headers["jobgate-callback"],
            request.headers["jobgate-lease"],
        )
        if push.name == "hang":
            await self.released.wait()
            return Response(status_code=200)
        status, body, media = ANSWERS[push.name]
        return Response(body, status, media_type=media)


ANSWERS: dict[str, tuple[int, bytes, str]] = {
    "s408": (408, b"", "text/plain"),
    "s502": (502, b"<html>Bad Gateway</html>", "text/html"),
    "s503": (503, b"", "text/plain"),
    "raised": (500, RAISED.model_dump_json().encode(), "application/json"),
    "refused": (422, b'{"error": "no such customer", "retryable": false}', "application/json"),
    "redirect": (307, b"", "text/plain"),
    "accepted": (202, b"", "text/plain"),
}


@dataclass
class Rig:
    api: httpx.AsyncClient
    worker: Worker

    async def dead(self, name: str, queue: str = "q") -> dict[str, Any]:
        r = await self.api.post(f"/v1/queues/{queue}/tasks", json={"name": name})
        assert r.status_code == 201, r.text
        task_id = r.json()["id"]
        r = await self.api.get(f"/v1/tasks/{task_id}", params={"wait": 10}, timeout=15)
        task = dict(r.json())
        assert task["state"] == "dead", task
        return task


@pytest.fixture
async def rig(redis_url: str) -> AsyncIterator[Rig]:
    worker = Worker()
    worker_app = Starlette(routes=[Route("/", worker.handle, methods=["POST"])])
    async with (
        serve(worker_app) as worker_url,
        live_gateway(redis_url, ADMIN) as (_gateway_url, api),
    ):
        policy = {
            "max_attempts": 1,
            "push_timeout": 0.3,
            "lease_timeout": 1,
            "max_retry_duration": 0,  # a busy answer fails at once too
        }
        for queue, url in (
            ("q", worker_url + "/"),
            ("nowhere", f"http://127.0.0.1:{free_port()}/"),
        ):
            (await api.put(f"/v1/queues/{queue}", json=policy)).raise_for_status()
            r = await api.post(f"/v1/queues/{queue}/endpoints", json={"url": url})
            assert r.status_code == 201, r.text
        try:
            yield Rig(api, worker)
        finally:
            worker.released.set()


def last(task: dict[str, Any]) -> tuple[str, int | None, str | None]:
    attempt = task["attempts"][-1]
    return attempt["outcome"], attempt["http_status"], attempt["failure"]


async def test_no_answer_within_the_push_timeout_is_a_timeout(rig: Rig) -> None:
    task = await rig.dead("hang")
    assert last(task) == ("error", None, "timeout")
    assert "no answer within 0.3s" in task["error"]


async def test_an_answer_408_is_a_timeout(rig: Rig) -> None:
    assert last(await rig.dead("s408")) == ("error", 408, "timeout")


async def test_a_5xx_answer_is_5xx_even_when_busy(rig: Rig) -> None:
    assert last(await rig.dead("s502")) == ("error", 502, "5xx")
    assert last(await rig.dead("s503")) == ("busy", 503, "5xx")


async def test_no_http_answer_at_all_is_a_connection_failure(rig: Rig) -> None:
    assert last(await rig.dead("x", queue="nowhere")) == ("error", None, "connection")


async def test_a_lease_that_ran_out_after_a_202_is_a_timeout(rig: Rig) -> None:
    task = await rig.dead("accepted")
    assert last(task) == ("expired", None, "timeout")


async def test_failures_the_worker_reported_itself_have_no_kind(rig: Rig) -> None:
    assert last(await rig.dead("raised")) == ("error", 500, None)  # the task raised
    assert last(await rig.dead("refused")) == ("failed", 422, None)
    assert last(await rig.dead("redirect")) == ("error", 307, None)
    r = await rig.api.post("/v1/queues/q/tasks", json={"name": "accepted"})
    task_id = r.json()["id"]
    await until(lambda: task_id in rig.worker.callbacks, what="push")
    url, lease = rig.worker.callbacks[task_id]
    async with httpx.AsyncClient() as cb:
        sent = await cb.post(
            f"{url}/error", json={"error": "it broke"}, headers={"jobgate-lease": lease}
        )
        assert sent.status_code == 200, sent.text
    task = (await rig.api.get(f"/v1/tasks/{task_id}")).json()
    assert last(task) == ("error", None, None)


# --- the policy through the API ---------------------------------------------------------------


def fields(response: httpx.Response) -> set[str]:
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    return {e["field"] for e in response.json()["errors"]}


async def test_the_redrive_policy_is_validated_naming_the_field(rig: Rig) -> None:
    api = rig.api
    bad = {
        "on": [],
        "after": -1,
        "every": 5,
        "max_redrives": 0,
    }
    for name, value in bad.items():
        r = await api.put("/v1/queues/p", json={"redrive": {name: value}})
        assert fields(r) == {f"redrive.{name}"}, r.text
    r = await api.put("/v1/queues/p", json={"redrive": {"on": ["timeout", "4xx"]}})
    assert fields(r) == {"redrive.on.1"}
    r = await api.put("/v1/queues/p", json={"redrive": {"every": 86_401, "after": 31 * 86_400}})
    assert fields(r) == {"redrive.every", "redrive.after"}
    r = await api.put("/v1/queues/p", json={"redrive": {"on": ["5xx", "5xx"]}})
    assert fields(r) == {"redrive"}
    r = await api.patch("/v1/queues/q", json={"redrive": {}, "remove_redrive": True})
    assert fields(r) == {"remove_redrive"}


async def test_redrive_is_off_by_default_set_by_patch_and_removed(rig: Rig) -> None:
    api = rig.api
    assert (await api.get("/v1/queues/q")).json()["policy"]["redrive"] is None
    r = await api.patch("/v1/queues/q", json={"redrive": {"on": ["connection"], "after": 0}})
    assert r.status_code == 200, r.text
    assert r.json()["policy"]["redrive"] == {
        "on": ["connection"],
        "after": 0,
        "every": 300,
        "max_redrives": 3,
    }
    assert r.json()["policy"]["max_attempts"] == 1  # the rest is kept
    r = await api.patch("/v1/queues/q", json={"remove_redrive": True})
    assert r.json()["policy"]["redrive"] is None
    r = await api.put("/v1/queues/q", json={"redrive": {}})
    assert r.json()["policy"]["redrive"]["on"] == ["timeout", "5xx", "connection"]
