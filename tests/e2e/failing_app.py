"""A worker endpoint that always fails: answers 500 to every push and logs it.

Run as ``uvicorn tests.e2e.failing_app:app``; ``E2E_LOG`` names the file where each push is
appended as a JSON line.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

LOG = os.environ.get("E2E_LOG")


async def app(scope: Any, receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    if scope["method"] == "POST" and LOG:
        headers = {k.decode(): v.decode() for k, v in scope["headers"]}
        with open(LOG, "a") as log:  # noqa: ASYNC230 - a test log line, appended atomically
            log.write(json.dumps({"id": headers.get("webhook-id"), "t": time.time()}) + "\n")
    status = 500 if scope["method"] == "POST" else 200
    await send({"type": "http.response.start", "status": status, "headers": []})
    await send({"type": "http.response.body", "body": b"broken"})
