"""Invoke ``handler.handler`` once, here, as a Lambda function URL would: one signed push.

    python examples/lambda/invoke.py TASK PAYLOAD

``PAYLOAD`` is the task's payload as JSON (``{"args": [...], "kwargs": {...}}``). The push is
signed with ``JOBGATE_WORKER_SECRET`` (a fresh secret when it is not set), handed to the
handler in a function URL event (payload format 2.0), and the answer is printed: its status,
then its body (exit code 0 whatever the status: the answer is the output). ``handler`` is
imported from the path, e.g. ``PYTHONPATH=build/lambda``, the folder that becomes
``function.zip``: README.md beside this file.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import sys
from datetime import UTC, datetime, timedelta
from typing import Any


class Context:
    """The parts of Lambda's context object the handler reads."""

    function_name = "jobgate-worker"
    function_version = "$LATEST"
    invoked_function_arn = "arn:aws:lambda:eu-west-1:123456789012:function:jobgate-worker"
    memory_limit_in_mb = 512
    aws_request_id = "00000000-0000-4000-8000-000000000000"
    log_group_name = "/aws/lambda/jobgate-worker"
    log_stream_name = "local"
    identity = None
    client_context = None

    def get_remaining_time_in_millis(self) -> int:
        return 30_000


def event(name: str, payload: Any, secret: str) -> dict[str, Any]:
    """A function URL event carrying the push of one task, signed as the gateway signs it."""
    from standardwebhooks import Webhook
    from ulid import ULID

    now = datetime.now(UTC)
    task_id = str(ULID())
    body = {
        "id": task_id,
        "queue": "lambda",
        "name": name,
        "payload": payload,
        "attempt": 1,
        "checkpoint": None,
        "deadline": (now + timedelta(hours=1)).isoformat(),
        "lease_expires_at": (now + timedelta(minutes=1)).isoformat(),
    }
    content = json.dumps(body, separators=(",", ":"))
    headers = {
        "content-type": "application/json",
        "webhook-id": task_id,
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": Webhook(secret).sign(task_id, now, content),
        "jobgate-attempt": "1",
        "jobgate-lease": "local-lease",
        "jobgate-callback": f"http://127.0.0.1:9/v1/tasks/{task_id}",
        "host": "local.lambda-url.eu-west-1.on.aws",
        "x-forwarded-proto": "https",
        "content-length": str(len(content.encode())),
    }
    return {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": "/",
        "rawQueryString": "",
        "headers": headers,
        "requestContext": {
            "accountId": "anonymous",
            "apiId": "local",
            "domainName": headers["host"],
            "domainPrefix": "local",
            "http": {
                "method": "POST",
                "path": "/",
                "protocol": "HTTP/1.1",
                "sourceIp": "127.0.0.1",
                "userAgent": "invoke.py",
            },
            "requestId": Context.aws_request_id,
            "routeKey": "$default",
            "stage": "$default",
            "time": now.strftime("%d/%b/%Y:%H:%M:%S +0000"),
            "timeEpoch": int(now.timestamp() * 1000),
        },
        "body": content,
        "isBase64Encoded": False,
    }


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    name, payload = argv[0], json.loads(argv[1])
    fresh = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
    secret = os.environ.setdefault("JOBGATE_WORKER_SECRET", fresh).split(",")[0]
    del sys.path[0]  # this script's folder: the handler comes from the path, as in Lambda
    import handler  # the function's code, as Lambda imports it

    answer = handler.handler(event(name, payload, secret), Context())
    print(answer["statusCode"], answer["body"])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
