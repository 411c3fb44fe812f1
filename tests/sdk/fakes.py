"""Test doubles of the SDK tests: a fake gateway for callbacks, and signed pushes to a worker."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from standardwebhooks import Webhook
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from ulid import ULID

from sdk import Worker
from sdk.wire import HEADER_ATTEMPT, HEADER_BATCH, HEADER_CALLBACK, HEADER_LEASE, BatchAnswer

SECRET = "whsec_" + base64.b64encode(b"s" * 32).decode()
OTHER_SECRET = "whsec_" + base64.b64encode(b"o" * 32).decode()
GATEWAY = "http://gateway.test"
LEASE = "lease-token-1"


@dataclass
class Callback:
    task_id: str
    kind: str
    lease: str | None
    body: Any
    traceparent: str | None = None


@dataclass
class FakeGateway:
    """The gateway's callback routes: records every callback, answers as told."""

    cancel: bool = False
    status: dict[str, int] = field(default_factory=dict)
    title: dict[str, str] = field(default_factory=dict)  # problem titles of refusals, by kind
    calls: list[Callback] = field(default_factory=list)
    delay: float = 0.0  # seconds before each answer
    # When set, each heartbeat that reports progress waits for the barrier's other parties.
    hold: asyncio.Barrier | None = None
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    def kinds(self) -> list[str]:
        return [call.kind for call in self.calls]

    def of(self, kind: str) -> list[Callback]:
        return [call for call in self.calls if call.kind == kind]

    async def wait_for(self, kind: str, count: int = 1, within: float = 5.0) -> list[Callback]:
        """The callbacks of ``kind`` once there are ``count`` of them (fails after ``within`` s)."""
        async with asyncio.timeout(within):
            while len(self.of(kind)) < count:
                self._changed.clear()
                await self._changed.wait()
        return self.of(kind)

    async def first_of(self, *kinds: str, within: float = 5.0) -> Callback:
        """The first callback of any of ``kinds``, once there is one (fails after ``within`` s)."""
        async with asyncio.timeout(within):
            while not (found := [call for call in self.calls if call.kind in kinds]):
                self._changed.clear()
                await self._changed.wait()
        return found[0]

    async def _callback(self, request: Request) -> Response:
        kind = request.path_params["kind"]
        call = Callback(
            request.path_params["task_id"],
            kind,
            request.headers.get(HEADER_LEASE),
            json.loads(await request.body()),
            request.headers.get("traceparent"),
        )
        self.calls.append(call)
        self._changed.set()
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.hold is not None and kind == "heartbeat" and call.body.get("progress"):
            await self.hold.wait()
        status = self.status.get(kind, 200)
        if status != 200:
            title = self.title.get(kind, "refused")
            return JSONResponse({"title": title, "status": status}, status)
        if kind == "heartbeat":
            expires = datetime.now(UTC) + timedelta(seconds=30)
            return JSONResponse(
                {"cancel_requested": self.cancel, "lease_expires_at": expires.isoformat()}
            )
        if kind == "step":
            return JSONResponse({"recorded": True, "attempt": 1, "cancel_requested": self.cancel})
        return JSONResponse({"state": "running"})

    def app(self) -> Starlette:
        routes = [Route("/v1/callbacks/{task_id}/{kind}", self._callback, methods=["POST"])]
        return Starlette(routes=routes)

    def transport(self) -> httpx.ASGITransport:
        return httpx.ASGITransport(app=self.app())


JsonDict = dict[str, Any]


def push_body(name: str, payload: Any = None, **fields: Any) -> JsonDict:
    """A push body as the gateway sends it; ``fields`` override the defaults."""
    now = datetime.now(UTC)
    body = {
        "id": str(ULID()),
        "queue": "default",
        "name": name,
        "payload": payload,
        "attempt": 1,
        "checkpoint": None,
        "lease_expires_at": (now + timedelta(seconds=30)).isoformat(),
        "deadline": (now + timedelta(hours=1)).isoformat(),
    }
    body.update(fields)
    return body


def webhook_headers(message_id: str, content: bytes, secret: str = SECRET) -> dict[str, str]:
    """Standard Webhooks headers, signed with ``secret`` by the reference code."""
    now = datetime.now(UTC)
    return {
        "content-type": "application/json",
        "webhook-id": message_id,
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": Webhook(secret).sign(message_id, now, content.decode()),
        "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    }


def signed_headers(
    task_id: str, content: bytes, secret: str = SECRET, gateway: str = GATEWAY
) -> dict[str, str]:
    """The headers of a single push: signed, with the attempt, lease and callback."""
    return {
        **webhook_headers(task_id, content, secret),
        HEADER_ATTEMPT: "1",
        HEADER_LEASE: LEASE,
        HEADER_CALLBACK: f"{gateway}/v1/callbacks/{task_id}",
    }


def batch_item(name: str, payload: Any = None, gateway: str = GATEWAY, **fields: Any) -> JsonDict:
    """One task of a batch push: a push body with its own lease token and callback URL."""
    body = push_body(name, payload, **fields)
    body.setdefault("lease", f"lease-of-{body['id']}")
    body.setdefault("callback", f"{gateway}/v1/callbacks/{body['id']}")
    return body


def batch_headers(content: bytes, count: int, secret: str = SECRET) -> dict[str, str]:
    """The headers of a batch push: signed under an id of the batch, with the task count."""
    return {**webhook_headers(f"batch_{ULID()}", content, secret), HEADER_BATCH: str(count)}


@dataclass
class Pusher:
    """Sends pushes to a worker app, as the gateway would."""

    http: httpx.AsyncClient
    gateway: str = GATEWAY
    path: str = "/"
    body = staticmethod(push_body)
    headers = staticmethod(signed_headers)

    async def send(self, content: bytes, headers: dict[str, str]) -> httpx.Response:
        return await self.http.post(self.path, content=content, headers=headers)

    async def __call__(
        self, name: str, payload: Any = None, *, secret: str = SECRET, **fields: Any
    ) -> httpx.Response:
        """Push task ``name``, signed with ``secret``."""
        body = push_body(name, payload, **fields)
        content = json.dumps(body).encode()
        headers = signed_headers(body["id"], content, secret, self.gateway)
        return await self.send(content, headers)

    def item(self, name: str, payload: Any = None, **fields: Any) -> JsonDict:
        """A task for :meth:`batch`, calling back to this pusher's gateway."""
        return batch_item(name, payload, self.gateway, **fields)

    async def batch(self, *items: JsonDict, secret: str = SECRET) -> httpx.Response:
        """Push ``items`` (made by :meth:`item`) as one batch, signed with ``secret``."""
        content = json.dumps({"tasks": list(items)}).encode()
        return await self.send(content, batch_headers(content, len(items), secret))


def batch_answer(response: httpx.Response) -> BatchAnswer:
    """The worker's answer to a batch push: 200 with a BatchAnswer."""
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/json"
    return BatchAnswer.model_validate_json(response.content)


Serve = Callable[[Worker], AbstractAsyncContextManager[Pusher]]
MakeWorker = Callable[..., Worker]


@asynccontextmanager
async def serve_worker(worker: Worker) -> AsyncIterator[Pusher]:
    transport = httpx.ASGITransport(app=worker)
    async with (
        worker.lifespan(),
        httpx.AsyncClient(transport=transport, base_url="http://worker.test") as http,
    ):
        yield Pusher(http)
