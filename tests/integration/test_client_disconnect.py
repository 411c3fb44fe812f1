"""A worker that goes away while the gateway reads its callback's body is logged as a
disconnect (info, no traceback), not as an unhandled error."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from ulid import ULID

from gateway.app import create_app
from gateway.settings import ApiKey, Settings
from sdk.wire import HEADER_LEASE


async def test_a_disconnect_mid_callback_body_is_logged_as_a_disconnect(
    redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    settings = Settings(redis_url=redis_url, api_keys=[ApiKey(key="k" * 20, scopes=["admin"])])
    app = create_app(settings)
    caplog.set_level(logging.DEBUG, logger="gateway")
    messages = iter(
        [
            {"type": "http.request", "body": b'{"progress": 0.', "more_body": True},
            {"type": "http.disconnect"},
        ]
    )
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return next(messages)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    path = f"/v1/callbacks/q/{ULID()}/heartbeat"
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"content-type", b"application/json"), (HEADER_LEASE.encode(), b"lease")],
        "client": ("127.0.0.1", 40000),
        "server": ("127.0.0.1", 8080),
    }
    async with app.router.lifespan_context(app) as state:
        await app({**scope, "state": dict(state)}, receive, send)

    records = [r for r in caplog.records if r.name.startswith("gateway")]
    assert not [r for r in records if r.levelno >= logging.WARNING], [r.msg for r in records]
    assert not [r for r in records if r.exc_info], "no traceback for a disconnect"
    (record,) = [r for r in records if "disconnected" in r.getMessage()]
    assert record.levelno == logging.INFO
    assert path in record.getMessage()
