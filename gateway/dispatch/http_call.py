"""Making one durable HTTP call (docs/durable.md, "A durable HTTP call"): the request a task
asked for (:class:`~sdk.wire.CallIn`), sent over the pushes' pooled session with the endpoints'
SSRF rules, and its answer or failure as the step's result.

The rules, stated once here and in the docs:

- the header ``Idempotency-Key: <task id>:<step>`` rides on every try (and every redirect);
- the URL, and each redirect's ``Location``, is checked by the endpoints' SSRF rules before it
  is requested (the session's resolver and socket factory check the addresses again when
  connecting); redirects are followed by hand, at most :data:`MAX_REDIRECTS`: 307 and 308 keep
  the method and body, 301, 302 and 303 become a GET without body (HEAD stays HEAD); headers
  that carry credentials (Authorization, Cookie) are dropped when the host changes;
- a try ends at the call's timeout (its answer's body read included), which is the only
  timeout (the session's own are off, as for pushes);
- connection errors before any answer are tried again, :data:`TRIES` tries in all, after
  :data:`RETRY_DELAYS` seconds; an answer of any status is the result (no retry on 5xx: the
  task decides), and so is a timeout (the callee may be at work on it);
- the answer's body is read up to ``max_body`` bytes: a larger one is the failure
  ``too_large``.

The step's result: ``{"status", "headers" (lower-case names; repeated ones joined by ", "),
"body" (the JSON when the answer says JSON and parses as JSON, without NaN or Infinity,
else the text)}``, or, when no answer
came, ``{"error": why, "kind": "refused" | "unreachable" | "timed_out" | "too_large" |
"redirects"}``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Collection
from typing import Any
from urllib.parse import urljoin, urlsplit

import aiohttp

from gateway.dispatch.pusher import NO_TIMEOUT
from gateway.security.ssrf import AddressRefused, check_endpoint_url
from sdk.wire import CallIn

MAX_REDIRECTS = 5
TRIES = 3
RETRY_DELAYS = (1.0, 2.0)  # before the second and the third try
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_CREDENTIALS = frozenset({"authorization", "cookie"})


class CallFailed(Exception):
    """No answer to record: ``kind`` and the reason (the step's result ``{error, kind}``)."""

    def __init__(self, kind: str, reason: str) -> None:
        super().__init__(reason)
        self.kind = kind

    def result(self) -> dict[str, Any]:
        return {"error": str(self), "kind": self.kind}


class _Unreachable(CallFailed):
    """A connection error before any answer: tried again."""

    def __init__(self, reason: str) -> None:
        super().__init__("unreachable", reason)


def idempotency_key(task_id: str, step: str) -> str:
    """The ``Idempotency-Key`` of a task's call in ``step``."""
    return f"{task_id}:{step}"


async def make_call(
    session: aiohttp.ClientSession,
    request: CallIn,
    key: str,
    *,
    max_body: int,
    allow_private: bool,
    before_retry: Callable[[], Awaitable[bool]] | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> str | None:
    """Make the call, with its retries, and return the step's result (JSON). Before each
    retry ``before_retry`` renews the call's lease: when it says False (the call is no
    longer awaited: the task was resumed, cancelled or timed out), None is returned."""
    for attempt in range(TRIES):
        if attempt and before_retry is not None and not await before_retry():
            return None
        try:
            async with asyncio.timeout(request.timeout):
                found = await _one_try(session, request, key, max_body, allow_private)
        except TimeoutError:
            found = CallFailed("timed_out", f"no answer within {request.timeout:g}s").result()
        except _Unreachable as e:
            if attempt + 1 < TRIES:
                await sleep(RETRY_DELAYS[attempt])
                continue
            found = CallFailed("unreachable", f"{e} ({TRIES} tries)").result()
        except CallFailed as e:
            found = e.result()
        return json.dumps(found, separators=(",", ":"), ensure_ascii=False)
    raise AssertionError("unreachable")  # pragma: no cover (the loop always returns)


async def _one_try(
    session: aiohttp.ClientSession, request: CallIn, key: str, max_body: int, allow_private: bool
) -> dict[str, Any]:
    method, url = request.method, request.url
    headers = {**request.headers, "Idempotency-Key": key}
    data: bytes | None = None
    if request.json_body is not None:
        data = json.dumps(request.json_body, separators=(",", ":")).encode()
        headers.setdefault("Content-Type", "application/json")
    elif request.body is not None:
        data = request.body.encode()
    for _ in range(MAX_REDIRECTS + 1):
        try:
            await check_endpoint_url(url, allow_private)
        except ValueError as e:
            raise CallFailed("refused", f"{url}: {e}") from e
        try:
            async with session.request(
                method, url, data=data, headers=headers, allow_redirects=False, timeout=NO_TIMEOUT
            ) as answer:
                location = answer.headers.get("Location")
                if answer.status in _REDIRECTS and location:
                    nxt = urljoin(url, location)
                    if urlsplit(nxt).netloc != urlsplit(url).netloc:
                        headers = _without(headers, _CREDENTIALS)
                    if answer.status in (301, 302, 303) and method != "HEAD":
                        method, data = "GET", None
                        headers = _without(headers, {"content-type"})
                    url = nxt
                    continue
                return await _answer(answer, max_body)
        except aiohttp.ClientConnectorError as e:
            if isinstance(e.os_error, AddressRefused):
                raise CallFailed("refused", str(e.os_error)) from e
            raise _Unreachable(f"{url}: {e}") from e
        except (aiohttp.ClientError, OSError) as e:
            raise _Unreachable(f"{url}: {type(e).__name__}: {e}") from e
    raise CallFailed("redirects", f"more than {MAX_REDIRECTS} redirects")


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


def _without(headers: dict[str, str], names: Collection[str]) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k.lower() not in names}


async def _answer(answer: aiohttp.ClientResponse, max_body: int) -> dict[str, Any]:
    if answer.content_length is not None and answer.content_length > max_body:
        raise CallFailed("too_large", f"the answer's body exceeds {max_body} bytes")
    raw = bytearray()
    while chunk := await answer.content.read(max_body + 1 - len(raw)):
        raw += chunk
        if len(raw) > max_body:
            raise CallFailed("too_large", f"the answer's body exceeds {max_body} bytes")
    headers: dict[str, str] = {}
    for name, value in answer.headers.items():
        low = name.lower()
        headers[low] = f"{headers[low]}, {value}" if low in headers else value
    try:
        text = raw.decode(answer.charset or "utf-8", errors="replace")
    except LookupError:  # a charset Python does not know
        text = raw.decode("utf-8", errors="replace")
    body: Any = text
    kind = answer.content_type
    if text and (kind == "application/json" or kind.endswith("+json")):
        try:
            body = json.loads(text, parse_constant=_not_json)
        except ValueError:  # not JSON after all (NaN, Infinity included): kept as text
            body = text
    return {"status": answer.status, "headers": headers, "body": body}
