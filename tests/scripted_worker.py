"""A scripted push worker and a rig around a live gateway, shared by the dispatch tests on one
Redis (tests/integration/test_dispatch.py) and on a Redis Cluster (tests/cluster/).

The worker is a bare Starlette handler (not the SDK), so each answer can be scripted exactly.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import httpx
from standardwebhooks import Webhook
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from sdk.wire import PushBatch, PushBody

ADMIN = "admin-key-0123456789"


@dataclass
class Worker:
    """Answers pushes as ``script[task name]`` says; records what it received."""

    secret: str = ""
    received: list[tuple[dict[str, str], PushBody]] = field(default_factory=list)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    script: dict[str, Any] = field(default_factory=dict)
    batches: list[int] = field(default_factory=list)

    async def handle(self, request: Request) -> Response:
        body = await request.body()
        headers = dict(request.headers)
        try:
            Webhook(self.secret).verify(body, headers)
        except Exception:
            return JSONResponse({"error": "bad signature"}, status_code=401)
        if "jobgate-batch" in headers:
            return self.answer_batch(headers, PushBatch.model_validate_json(body))
        push = PushBody.model_validate_json(body)
        self.received.append((headers, push))
        self.arrived.set()
        status, content, *extra = self.answer(push)
        return JSONResponse(content, status_code=status, headers=extra[0] if extra else None)

    def answer(self, push: PushBody) -> Any:
        answer = self.script.get(push.name, (200, {"echo": push.payload}))
        return answer(push) if callable(answer) else answer

    def answer_batch(self, headers: dict[str, str], batch: PushBatch) -> Response:
        self.batches.append(len(batch.tasks))
        results = []
        for item in batch.tasks:
            self.received.append((headers, item))
            status, content, *_ = self.answer(item)
            if status < 300:
                results.append({"id": item.id, "status": status, "result": content})
            else:
                results.append({"id": item.id, "status": status, "error": content})
        self.arrived.set()
        return JSONResponse({"results": results})

    def pushes(self, task_id: str) -> list[tuple[dict[str, str], PushBody]]:
        return [(h, p) for h, p in self.received if p.id == task_id]


@dataclass
class Rig:
    api: httpx.AsyncClient
    worker: Worker
    gateway_url: str

    async def queue(self, name: str = "q", **policy: Any) -> None:
        (await self.api.put(f"/v1/queues/{name}", json=policy)).raise_for_status()

    async def enqueue(self, name: str, payload: Any = None, queue: str = "q", **kw: Any) -> str:
        r = await self.api.post(
            f"/v1/queues/{queue}/tasks", json={"name": name, "payload": payload, **kw}
        )
        assert r.status_code == 201, r.text
        return str(r.json()["id"])

    async def task(self, task_id: str) -> dict[str, Any]:
        r = await self.api.get(f"/v1/tasks/{task_id}")
        assert r.status_code == 200, r.text
        return dict(r.json())

    async def finished(self, task_id: str, timeout: float = 10) -> dict[str, Any]:
        r = await self.api.get(
            f"/v1/tasks/{task_id}", params={"wait": timeout}, timeout=timeout + 5
        )
        task = dict(r.json())
        assert task["state"] in ("succeeded", "failed", "dead", "cancelled"), task
        return task
