"""The workflow worker: serves ``price_order`` and ``fulfil_order`` on http://127.0.0.1:8003.

Run it next to ``make dev``, from the repository root::

    .venv/bin/python examples/workflow/worker.py

Started this way without ``JOBGATE_WORKER_SECRET``, it first registers the ``orders`` queue
(retries after 1 s) and itself as that queue's endpoint, and signs with the secret the
registration returns. ``WORKFLOW_HOST``, ``WORKFLOW_PORT`` and ``WORKFLOW_URL`` change where
it listens and the URL it registers.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import uvicorn
from tasks import fulfil_order, price_order

from sdk import Client, Worker

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "hello"))  # hello's dev helpers
from devgateway import one_line_errors, use_dev_gateway

HOST = os.environ.get("WORKFLOW_HOST", "127.0.0.1")
PORT = int(os.environ.get("WORKFLOW_PORT", "8003"))
URL = os.environ.get("WORKFLOW_URL", f"http://{HOST}:{PORT}/")  # where the gateway pushes
TASKS = [price_order, fulfil_order]


def register() -> str:
    """Register the queue and this worker as its endpoint; return the endpoint's secret."""
    with Client.from_env() as client:
        client.put_queue(
            "orders", backoff={"strategy": "constant", "base_delay": 1, "max_delay": 1}
        )
        for endpoint in client.list_endpoints("orders"):
            if endpoint.url == URL:  # left by an earlier run: its secret is gone with it
                client.delete_endpoint("orders", endpoint.id)
        return client.add_worker("orders", URL, TASKS).secret


if __name__ == "__main__" and "JOBGATE_WORKER_SECRET" not in os.environ:
    use_dev_gateway()
    with one_line_errors():
        os.environ["JOBGATE_WORKER_SECRET"] = register()

app = Worker(tasks=TASKS, secret=os.environ["JOBGATE_WORKER_SECRET"])

if __name__ == "__main__":
    uvicorn.run(app, host=HOST, port=PORT)
