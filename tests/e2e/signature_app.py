"""A worker endpoint that records what signs each push: appends its Standard Webhooks headers
and its body to the file named by ``E2E_LOG`` (one JSON line each), and answers 200 ``null``
without verifying anything (the test verifies each push with the secrets it holds).

Run as ``uvicorn tests.e2e.signature_app:app``.
"""

from __future__ import annotations

import json
import os
from typing import Any

LOG = os.environ.get("E2E_LOG")
SIGNING = ("webhook-id", "webhook-timestamp", "webhook-signature")


async def app(scope: Any, receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    if scope["method"] == "POST" and LOG:
        headers = {k.decode(): v.decode() for k, v in scope["headers"] if k.decode() in SIGNING}
        with open(LOG, "a") as log:  # noqa: ASYNC230 - a test log line, appended atomically
            log.write(json.dumps({"headers": headers, "body": body.decode()}) + "\n")
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"application/json")],
        }
    )
    await send({"type": "http.response.body", "body": b"null"})
