"""HTTP/3 for real: a gateway process with a certificate (``gateway.serving.tls.self_signed``, as
``jobgate dev --tls`` makes) serves the API over QUIC; an aioquic client enqueues a task and
reads it back, and the TCP side (HTTPS) advertises HTTP/3 with Alt-Svc."""

from __future__ import annotations

import asyncio
import json
import ssl
from pathlib import Path

import httpx
import pytest

from gateway.serving.tls import self_signed

from .conftest import ADMIN, Cluster
from .h3client import h3_client

pytestmark = pytest.mark.e2e


def test_enqueue_and_read_back_over_http3_and_alt_svc_over_tcp(
    cluster: Cluster, tmp_path: Path
) -> None:
    cert, key = self_signed(tmp_path / "tls")
    gateway = cluster.gateway(JOBGATE_CERTFILE=str(cert), JOBGATE_KEYFILE=str(key))
    port = int(gateway.rsplit(":", 1)[1])

    trust = ssl.create_default_context(cafile=str(cert))
    with httpx.Client(base_url=gateway, verify=trust, http2=True) as tcp:
        answer = tcp.get("/healthz")
        assert answer.http_version == "HTTP/2"
        assert f'h3=":{port}"' in answer.headers["alt-svc"]

    auth = {"authorization": f"Bearer {ADMIN}", "content-type": "application/json"}

    async def over_quic() -> None:
        async with h3_client("127.0.0.1", port, cert) as h3:
            made = await h3.request("PUT", "/v1/queues/h3", auth, b"{}")
            assert made.status == 201, made.body
            body = json.dumps({"name": "hello", "payload": {"over": "quic"}}).encode()
            enqueued = await h3.request("POST", "/v1/queues/h3/tasks", auth, body)
            assert enqueued.status == 201, enqueued.body
            task_id = json.loads(enqueued.body)["id"]
            read = await h3.request("GET", f"/v1/tasks/{task_id}", auth)
            assert read.status == 200
            task = json.loads(read.body)
            assert (task["queue"], task["state"], task["payload"]) == (
                "h3",
                "queued",
                {"over": "quic"},
            )
            refused = await h3.request("GET", "/v1/queues")
            assert refused.status == 401
            assert refused.headers["content-type"] == "application/problem+json"

    asyncio.run(over_quic())
