"""Sending one push: the signed POST to an endpoint, over one shared pooled aiohttp session.

aiohttp is used here, and only here, because it measured several times cheaper per request than
httpx on this path (bench/RESULTS.md); the SDK uses httpx.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import secrets
import time
from collections.abc import Iterator, Sequence
from json.encoder import encode_basestring_ascii as quoted
from typing import Any
from urllib.parse import unquote

import aiohttp
from aiohttp.abc import AbstractResolver
from aiohttp.client_reqrep import ConnectionKey
from aiohttp.connector import Connection

from gateway.dispatch.deadlines import Cut, Deadlines
from gateway.dispatch.verdict import Answer, batch_answers
from gateway.security.ssrf import AddressRefused, GuardedResolver, guarded_socket_factory
from gateway.store.endpoint_records import EndpointRecord
from gateway.store.records import Lease, to_datetime
from gateway.telemetry.metrics import Metrics, answer_class
from gateway.telemetry.tracing import Tracing, carrier
from sdk.signatures import secret_key, signature
from sdk.wire import (
    HEADER_ATTEMPT,
    HEADER_BATCH,
    HEADER_CALLBACK,
    HEADER_LEASE,
    HEADER_TASK_FAILURE,
    HEADER_WARNING,
    FailureKind,
)

MAX_ANSWER_BYTES = 4 * 1024 * 1024
MAX_WARNING = 8192


def push_body(lease: Lease, extra: str = "") -> str:
    """The PushBody JSON, assembled around the stored payload and checkpoint without re-parsing
    them (tests check it against the ``PushBody`` model). ``extra`` adds fields (batch items).
    Strings are quoted by ``json``'s own C quoting function (``json.dumps`` per string costs
    three times as much)."""
    return (
        f'{{"id":{quoted(lease.task_id)},"queue":{quoted(lease.queue)},'
        f'"name":{quoted(lease.name)},"payload":{lease.payload_json},'
        f'"attempt":{lease.attempt},"checkpoint":{lease.checkpoint_json or "null"},'
        f'"lease_expires_at":"{_iso(lease.expires_ms)}","deadline":"{_iso(lease.deadline_ms)}"'
        f"{_ready_at(lease)}{_steps(lease)}{_results(lease)}{extra}}}"
    )


def _iso(ms: int) -> str:
    """``ms`` since the epoch in ISO 8601, UTC, as ``datetime.isoformat`` writes it (the
    microseconds only when not zero), from the whole second's text, cached: a push's three
    times cost a third of a datetime and ``isoformat`` each."""
    seconds, rest = divmod(ms, 1000)
    return f"{_second(seconds)}.{rest:03d}000+00:00" if rest else f"{_second(seconds)}+00:00"


@functools.lru_cache(maxsize=4096)
def _second(seconds: int) -> str:
    return to_datetime(seconds * 1000).isoformat()[:-6]  # less "+00:00"


def _steps(lease: Lease) -> str:
    """The optional ``steps`` field: the durable steps earlier attempts recorded, if any."""
    return f',"steps":{lease.steps_json}' if lease.steps_json else ""


def _results(lease: Lease) -> str:
    """The optional ``results`` field: the dependencies' results, for ``pass_results``."""
    if lease.results_json is None:
        return ""
    return f',"results":{lease.results_json}'


def _ready_at(lease: Lease) -> str:
    """The optional ``ready_at`` field: when the task became due, if the lease knows it."""
    if not lease.ready_ms:
        return ""
    return f',"ready_at":"{_iso(lease.ready_ms)}"'


def callback_url(base: str, lease: Lease) -> str:
    return f"{base}/v1/callbacks/{lease.queue}/{lease.task_id}"


def batch_body(leases: Sequence[Lease], callback_base: str) -> str:
    """The PushBatch JSON: each task's push body with its lease token, callback URL and trace
    context."""
    items = ",".join(
        push_body(
            lease,
            f',"lease":{quoted(lease.token)},'
            f'"callback":{quoted(callback_url(callback_base, lease))}' + _trace_fields(lease),
        )
        for lease in leases
    )
    return f'{{"tasks":[{items}]}}'


def _trace_fields(lease: Lease) -> str:
    if not lease.traceparent:
        return ""
    fields = f',"traceparent":{quoted(lease.traceparent)}'
    if lease.tracestate:
        fields += f',"tracestate":{quoted(lease.tracestate)}'
    return fields


# aiohttp's own timeouts are off for pushes (a timer and a context per request): the push
# timeout is kept by the pusher's deadlines (gateway/dispatch/deadlines.py).
NO_TIMEOUT = aiohttp.ClientTimeout()


def new_session(
    *, allow_private: bool, connections: int = 512, dns: AbstractResolver | None = None
) -> aiohttp.ClientSession:
    """The pushes' pooled session. Every connection is checked against SSRF twice: the resolver
    drops refused addresses (``dns`` does the lookups, aiohttp's default resolver unless given),
    and the socket factory refuses to connect to one whatever resolved it (IP-literal URLs
    bypass the resolver). Cookies that endpoints set are dropped, never sent back."""
    connector = PoolConnector(
        limit=connections,
        limit_per_host=0,
        resolver=GuardedResolver(allow_private, dns),
        socket_factory=guarded_socket_factory(allow_private),
        keepalive_timeout=60,
    )
    # No cookie jar: a cookie one endpoint sets must not ride on the pushes and notices to
    # every other endpoint of the same host (another queue, another team's service). A push's
    # body is written by aiohttp's own task, a turn after its headers on Python 3.11: writing
    # it in the same step (sdk/eager_body.py) made enqueue to start 0.80-0.86x but the
    # producer's answer 1.08-1.18x on the bench's two cores (bench/HISTORY.md, "Enqueue to
    # start, round 3").
    return aiohttp.ClientSession(
        connector=connector,
        auto_decompress=True,
        trust_env=False,
        cookie_jar=aiohttp.DummyCookieJar(),
    )


# Whether the request this task sent last went on a connection from the pool (one that had
# carried a request before), as :class:`PoolConnector` found it; and whether this task's next
# request must go on a new connection.
_reused: contextvars.ContextVar[bool] = contextvars.ContextVar("reused", default=False)
_fresh: contextvars.ContextVar[bool] = contextvars.ContextVar("fresh", default=False)


class PoolConnector(aiohttp.TCPConnector):
    """aiohttp's connector, noting when a request's connection came from the pool
    (:data:`_reused`), and able to skip the pool for one request (:data:`_fresh`).

    A pooled keep-alive connection may be closed by the server just as a push is sent on it:
    its idle timeout (uvicorn's 5 s by default, against this pool's 60 s) and the push cross on
    the wire. Such a push fails at once with no answer, though the worker never read it;
    :meth:`Pusher._send` sends it once more on a new connection."""

    async def _get(self, key: ConnectionKey, *args: Any, **kwargs: Any) -> Connection | None:
        # aiohttp's own "a pooled connection for this key, if any" (3.12 and later), which
        # its connect() asks before it opens a new one; its other arguments are passed on as
        # they come, so a release that adds one does not break every push.
        if _fresh.get():
            return None
        connection = await super()._get(key, *args, **kwargs)
        if connection is not None:
            _reused.set(True)
        return connection


class Pusher:
    def __init__(
        self,
        session: aiohttp.ClientSession,
        callback_base: str,
        tracing: Tracing | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self._session = session
        self._callback_base = callback_base
        self._tracing = tracing or Tracing.off()
        self._metrics = metrics or Metrics()
        self._keys: dict[str, bytes] = {}
        self._deadlines = Deadlines[Cut](Cut.now)

    def _key(self, secret: str) -> bytes:
        key = self._keys.get(secret)
        if key is None:
            key = self._keys[secret] = secret_key(secret)
        return key

    def callback(self, lease: Lease) -> str:
        return callback_url(self._callback_base, lease)

    def signed(self, message_id: str, signing: Sequence[str], body: bytes) -> dict[str, str]:
        """Standard Webhooks headers, with one signature per secret (two during a rotation's
        overlap window), separated by spaces as the specification allows. The secrets are the
        claim's (``Lease.secrets``): chosen by the exact time of the claim, in the script, so
        no push claimed after a rotation's overlap ended carries the previous one. The
        timestamp is this machine's wall clock, which the receiver's tolerance is checked
        against."""
        seconds = int(time.time())
        signatures = " ".join(
            signature(self._key(secret), message_id, seconds, body) for secret in signing
        )
        return {
            "content-type": "application/json",
            "webhook-id": message_id,
            "webhook-timestamp": str(seconds),
            "webhook-signature": signatures,
        }

    def headers(self, lease: Lease, body: bytes) -> dict[str, str]:
        """Headers of a single push; ``webhook-id`` is the task id, the same on every attempt.
        (One dict, added to: this is per push.)"""
        headers = self.signed(lease.task_id, lease.secrets, body)
        headers[HEADER_ATTEMPT] = str(lease.attempt)
        headers[HEADER_LEASE] = lease.token
        headers[HEADER_CALLBACK] = callback_url(self._callback_base, lease)
        if lease.traceparent:
            headers.update(carrier(lease.traceparent, lease.tracestate))
        return headers

    async def push(self, lease: Lease, endpoint: EndpointRecord, push_timeout: float) -> Answer:
        """One task, one POST; traced when tracing is on and the task's trace is sampled (the
        push's span is then the parent the worker sees, else the task's stored context goes as
        it is)."""
        body = push_body(lease).encode()
        headers = self.headers(lease, body)
        if not self._tracing.follows(lease.traceparent):
            return await self._post(endpoint, body, headers, push_timeout)
        return await self._traced_post([lease], endpoint, body, headers, push_timeout)

    async def push_batch(
        self, leases: Sequence[Lease], endpoint: EndpointRecord, push_timeout: float
    ) -> list[Answer]:
        """Several tasks in one POST (a ``PushBatch``); one answer per lease, in order."""
        body = batch_body(leases, self._callback_base).encode()
        headers = {
            # One claim's leases of one endpoint: the same secrets.
            **self.signed(f"batch_{secrets.token_hex(12)}", leases[0].secrets, body),
            HEADER_BATCH: str(len(leases)),
        }
        if any(self._tracing.follows(lease.traceparent) for lease in leases):
            answer = await self._traced_post(leases, endpoint, body, headers, push_timeout)
        else:
            answer = await self._post(endpoint, body, headers, push_timeout)
        return batch_answers(answer, [lease.task_id for lease in leases])

    async def _traced_post(
        self,
        leases: Sequence[Lease],
        endpoint: EndpointRecord,
        body: bytes,
        headers: dict[str, str],
        push_timeout: float,
    ) -> Answer:
        with self._tracing.push(leases, endpoint, headers) as span:
            answer = await self._post(endpoint, body, headers, push_timeout)
            span.answered(answer.status, answer.failure)
        return answer

    async def _post(
        self, endpoint: EndpointRecord, body: bytes, headers: dict[str, str], push_timeout: float
    ) -> Answer:
        """Send the push and record it (answer class, time to answer). A push cut off at its
        lease's end is cancelled here and not recorded."""
        started = time.perf_counter()
        answer = await self._send(endpoint, body, headers, push_timeout, started)
        self._metrics.pushed(
            endpoint.queue,
            endpoint.id,
            answer_class(answer.status, answer.failure),
            (time.perf_counter() - started) * 1000,
        )
        return answer

    async def _send(
        self,
        endpoint: EndpointRecord,
        body: str | bytes,
        headers: dict[str, str],
        push_timeout: float,
        started: float | None = None,
    ) -> Answer:
        """The push's answer. A push that went on a pooled connection and got no answer because
        the connection was closed (never a timeout, never a failure to connect) is sent once
        more, at once, on a new connection, within what is left of ``push_timeout`` since
        ``started`` (``time.perf_counter()``): the worker most likely closed that connection,
        idle, as the push was on its way, and never read it. This is the rule of Go's net/http
        for a request that carries an idempotency key (``webhook-id`` is the worker's):
        without it, each such race spent an attempt, fed the endpoint's circuit breaker and
        put the task back behind the queue's backoff."""
        data = body.encode() if isinstance(body, str) else body
        _reused.set(False)
        answered = False
        timeout = Cut()
        deadlines = self._deadlines
        deadlines.add(push_timeout, timeout)
        try:
            try:
                async with self._session.post(
                    endpoint.url,
                    data=data,
                    headers=headers,
                    allow_redirects=False,
                    timeout=NO_TIMEOUT,
                ) as response:
                    answered = True
                    warning = response.headers.get(HEADER_WARNING)
                    return Answer(
                        response.status,
                        await _read_capped(response),
                        response.headers.get("content-type", ""),
                        response.headers.get("retry-after"),
                        warning=unquote(warning)[:MAX_WARNING] if warning else None,
                        task_failure=response.headers.get(HEADER_TASK_FAILURE, "").strip() == "1",
                    )
            finally:
                timeout.ended = True
                deadlines.ended()
        except (asyncio.CancelledError, TimeoutError) as e:
            if isinstance(e, asyncio.CancelledError) and not timeout.was_cut():
                raise  # not (only) the push timeout's cancellation
            return Answer(
                None, failure=f"no answer within {push_timeout:g}s", kind=FailureKind.TIMEOUT
            )
        except (aiohttp.ClientError, OSError) as e:
            if started is not None and not answered and closed_under_it(e):
                left = push_timeout - (time.perf_counter() - started)
                if left > 0:
                    with fresh_connection():
                        return await self._send(endpoint, data, headers, left)
            return Answer(None, failure=_failure(e), kind=no_answer_kind(e))


def mark_sent() -> None:
    """This task is about to send a request: :func:`closed_under_it` is about that one."""
    _reused.set(False)


def closed_under_it(e: BaseException) -> bool:
    """Whether the request this task just sent, which got no answer, failed because its pooled
    keep-alive connection was closed under it (:class:`PoolConnector`): worth sending once more
    on a new connection, as the receiver most likely never read it."""
    return (
        _reused.get()
        and isinstance(e, aiohttp.ServerDisconnectedError | aiohttp.ClientOSError)
        and not isinstance(e, aiohttp.ClientConnectorError)
    )


@contextlib.contextmanager
def fresh_connection() -> Iterator[None]:
    """This task's requests, inside, go on new connections, not pooled ones."""
    fresh = _fresh.set(True)
    try:
        yield
    finally:
        _fresh.reset(fresh)


def _failure(e: Exception) -> str:
    """What went wrong with a push that got no answer; an SSRF refusal in its own words."""
    if isinstance(e, aiohttp.ClientConnectorError) and isinstance(e.os_error, AddressRefused):
        e = e.os_error
    if isinstance(e, AddressRefused):
        return f"refused: {e}"
    return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__


def no_answer_kind(e: Exception) -> FailureKind | None:
    """A push with no answer failed by connection, unless the SSRF guard refused the address
    (a policy, which no redrive heals)."""
    if isinstance(e, aiohttp.ClientConnectorError) and isinstance(e.os_error, AddressRefused):
        return None
    return None if isinstance(e, AddressRefused) else FailureKind.CONNECTION


async def _read_capped(response: aiohttp.ClientResponse) -> bytes:
    """The answer's body, at most MAX_ANSWER_BYTES of it (a result that big is cut)."""
    size = response.content_length
    if size is not None and size <= MAX_ANSWER_BYTES:
        return await response.read()  # the common case: one read of a known, small length
    body = bytearray()
    while len(body) < MAX_ANSWER_BYTES:
        chunk = await response.content.read(MAX_ANSWER_BYTES - len(body))
        if not chunk:
            break
        body += chunk
    return bytes(body)
