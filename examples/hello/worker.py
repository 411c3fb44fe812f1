"""The hello worker: serves ``greet`` and ``slow_count`` on http://127.0.0.1:8001.

Run it next to ``make dev``, from the repository root::

    .venv/bin/python examples/hello/worker.py

Started this way without ``JOBGATE_WORKER_SECRET``, it first registers the ``hello`` queue and
itself as that queue's endpoint, and signs with the secret the registration returns. Deployed
for real, register the endpoint once, set ``JOBGATE_WORKER_SECRET`` and serve ``app`` with any
ASGI server (``uvicorn worker:app``).

``HELLO_HOST``, ``HELLO_PORT`` and ``HELLO_URL`` change where it listens and the URL it
registers (deploy/compose.yaml runs it in a container, reached at http://worker:8001/).
"""

from __future__ import annotations

import os

import uvicorn
from devgateway import one_line_errors, use_dev_gateway
from tasks import greet, slow_count

from sdk import Client, Worker

HOST = os.environ.get("HELLO_HOST", "127.0.0.1")
PORT = int(os.environ.get("HELLO_PORT", "8001"))
URL = os.environ.get("HELLO_URL", f"http://{HOST}:{PORT}/")  # where the gateway pushes


def register() -> str:
    """Register the queue and this worker as its endpoint; return the endpoint's secret."""
    with Client.from_env() as client:
        client.put_queue("hello")
        for endpoint in client.list_endpoints("hello"):
            if endpoint.url == URL:  # left by an earlier run: its secret is gone with it
                client.delete_endpoint("hello", endpoint.id)
        # an SDK worker: batches of pushes when a backlog builds, and the task catalog
        # (enqueues of greet and slow_count are checked against their hints)
        return client.add_worker("hello", URL, [greet, slow_count]).secret


if __name__ == "__main__" and "JOBGATE_WORKER_SECRET" not in os.environ:
    use_dev_gateway()
    with one_line_errors():
        os.environ["JOBGATE_WORKER_SECRET"] = register()

app = Worker(tasks=[greet, slow_count], secret=os.environ["JOBGATE_WORKER_SECRET"])

if __name__ == "__main__":
    uvicorn.run(app, host=HOST, port=PORT)
