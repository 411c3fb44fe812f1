"""Sending one push: the signed POST to an endpoint, over one shared pooled aiohttp session.

aiohttp is used here, and only here, because it measured several times cheaper per request than
httpx on this path (bench/RESULTS.md); the SDK uses httpx.
"""

from __future__ import annotations

import functools
import json
import secrets
import time
from datetime import UTC, datetime

import aiohttp
from standardwebhooks import Webhook

from gateway.dispatch.verdict import Answer
from gateway.ssrf import AddressRefused, GuardedResolver
from gateway.store.records import EndpointRecord, Lease, to_datetime
from sdk.wire import HEADER_ATTEMPT, HEADER_CALLBACK, HEADER_LEASE

MAX_ANSWER_BYTES = 4 * 1024 * 1024


def push_body(lease: Lease) -> str:
    """The PushBody JSON, assembled around the stored payload and checkpoint without re-parsing
    them (tests check it against the ``PushBody`` model)."""
    return (
        f'{{"id":{json.dumps(lease.task_id)},"queue":{json.dumps(lease.queue)},'
        f'"name":{json.dumps(lease.name)},"payload":{lease.payload_json},'
        f'"attempt":{lease.attempt},"checkpoint":{lease.checkpoint_json or "null"},'
        f'"lease_expires_at":"{to_datetime(lease.expires_ms).isoformat()}",'
        f'"deadline":"{to_datetime(lease.deadline_ms).isoformat()}"}}'
    )


@functools.lru_cache(maxsize=64)
def _timeout(seconds: float) -> aiohttp.ClientTimeout:
    return aiohttp.ClientTimeout(total=seconds)


def traceparent(lease: Lease) -> str:
    """A W3C trace context for this push: the task's trace, a new span."""
    trace_id = lease.traceparent.split("-")[1] if lease.traceparent else secrets.token_hex(16)
    return f"00-{trace_id}-{secrets.token_hex(8)}-01"


def new_session(*, allow_private: bool, connections: int = 512) -> aiohttp.ClientSession:
    connector = aiohttp.TCPConnector(
        limit=connections,
        limit_per_host=0,
        resolver=GuardedResolver(allow_private),
        keepalive_timeout=60,
    )
    return aiohttp.ClientSession(connector=connector, auto_decompress=True, trust_env=False)


class Pusher:
    def __init__(self, session: aiohttp.ClientSession, callback_base: str) -> None:
        self._session = session
        self._callback_base = callback_base
        self._signers: dict[str, Webhook] = {}

    def _signer(self, secret: str) -> Webhook:
        signer = self._signers.get(secret)
        if signer is None:
            signer = self._signers[secret] = Webhook(secret)
        return signer

    def headers(self, lease: Lease, endpoint: EndpointRecord, body: str) -> dict[str, str]:
        now = datetime.fromtimestamp(int(time.time()), tz=UTC)
        signature = self._signer(endpoint.secrets[0]).sign(lease.task_id, now, body)
        return {
            "content-type": "application/json",
            "webhook-id": lease.task_id,
            "webhook-timestamp": str(int(now.timestamp())),
            "webhook-signature": signature,
            HEADER_ATTEMPT: str(lease.attempt),
            HEADER_LEASE: lease.token,
            HEADER_CALLBACK: f"{self._callback_base}/v1/callbacks/{lease.queue}/{lease.task_id}",
            "traceparent": traceparent(lease),
        }

    async def push(self, lease: Lease, endpoint: EndpointRecord, push_timeout: float) -> Answer:
        body = push_body(lease)
        try:
            async with self._session.post(
                endpoint.url,
                data=body.encode(),
                headers=self.headers(lease, endpoint, body),
                allow_redirects=False,
                timeout=_timeout(push_timeout),
            ) as response:
                content = await response.content.read(MAX_ANSWER_BYTES)
                return Answer(
                    response.status,
                    content,
                    response.headers.get("content-type", ""),
                    response.headers.get("retry-after"),
                )
        except TimeoutError:
            return Answer(None, failure=f"no answer within {push_timeout:g}s")
        except AddressRefused as e:
            return Answer(None, failure=str(e))
        except (aiohttp.ClientError, OSError) as e:
            return Answer(None, failure=f"{type(e).__name__}: {e}" if str(e) else type(e).__name__)
