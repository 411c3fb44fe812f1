"""Enqueue tasks on the ``hello`` queue and print their results.

Run it next to ``make dev`` and ``worker.py``, from the repository root::

    .venv/bin/python examples/hello/producer.py
"""

from __future__ import annotations

from devgateway import one_line_errors, use_dev_gateway
from tasks import greet, slow_count

from sdk import Client, TaskHandle


def main() -> None:
    use_dev_gateway()

    handle = greet.delay("world")  # enqueue: the gateway pushes it to the worker
    print(handle.result(timeout=30))  # long-poll until it has run

    # Many small tasks in one request: all are stored, or none.
    with Client.from_env() as client:
        batch = [greet.create(args=[name]) for name in ("Ada", "Grace", "Edsger")]
        for task in client.enqueue_batch("hello", batch):
            print(TaskHandle(task, client).result(timeout=30))

    counting = slow_count.delay(6)  # longer than a push: heartbeats keep its lease
    print("counted to", counting.result(timeout=60))


if __name__ == "__main__":
    with one_line_errors():
        main()
