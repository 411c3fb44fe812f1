"""A Jobgate worker as an AWS Lambda function, behind a function URL or API Gateway.

Handler: ``handler.handler``. Environment: ``JOBGATE_WORKER_SECRET`` (the endpoint's signing
secret; several, comma-separated, while rotating it) and optionally ``JOBGATE_INLINE_WINDOW``
(seconds; keep it a little under the function's timeout so every task is answered inline). See
README.md beside this file for deploying it, and docs/workers.md ("Serverless") for how leases
and timeouts map onto the function's limits.
"""

from __future__ import annotations

import hashlib
import os

from sdk import Fail, Worker, task
from sdk.lambda_handler import lambda_handler


@task(queue="lambda", name="checksum")
def checksum(text: str, algorithm: str = "sha256") -> str:
    """The hex digest of a text's UTF-8 bytes."""
    if algorithm not in hashlib.algorithms_guaranteed:
        raise Fail(f"unknown algorithm {algorithm!r}")  # not retried
    return hashlib.new(algorithm, text.encode()).hexdigest()


@task(queue="lambda", name="thumbnail_size")
def thumbnail_size(width: int, height: int, longest: int = 256) -> dict[str, int]:
    """The size of a thumbnail whose longest side is ``longest``, keeping the aspect ratio."""
    if width <= 0 or height <= 0:
        raise Fail("width and height must be positive")
    scale = longest / max(width, height)
    return {"width": max(1, round(width * scale)), "height": max(1, round(height * scale))}


worker = Worker(
    tasks=[checksum, thumbnail_size],
    secret=os.environ["JOBGATE_WORKER_SECRET"].split(","),
    inline_window=float(os.environ.get("JOBGATE_INLINE_WINDOW", "25")),
)
handler = lambda_handler(worker)
