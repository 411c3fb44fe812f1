"""A worker endpoint with an outage: answers 500 (a plain-text crash page, as a broken proxy or
server would, not the worker's own error report) to every push while the file named by
``E2E_BROKEN`` exists, and 200 once it is gone.

Run as ``uvicorn tests.e2e.flaky_app:app``.
"""

from __future__ import annotations

import os
from typing import Any

BROKEN = os.environ.get("E2E_BROKEN", "/nonexistent")


async def app(scope: Any, receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    down = scope["method"] == "POST" and os.path.exists(BROKEN)  # noqa: ASYNC240 - a test flag
    status, body = (500, b"Internal Server Error") if down else (200, b'{"ok": true}')
    headers = [(b"content-type", b"text/plain" if down else b"application/json")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
