"""Enqueue an order workflow on the ``orders`` queue and tell how it went.

Run it next to ``make dev`` and ``worker.py``, from the repository root::

    .venv/bin/python examples/workflow/producer.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from tasks import fulfil_order, price_order

from sdk import Client, chain

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "hello"))  # hello's dev helpers
from devgateway import one_line_errors, use_dev_gateway


def main() -> None:
    use_dev_gateway()
    order = {"id": "A-1001", "items": {"tea": 2, "mug": 1}}
    # One batch request: fulfil_order starts once price_order has succeeded, with its result.
    run = chain(price_order.s(order), fulfil_order.s()).delay()
    # The order waits for someone to approve it: here, once it is waiting, the producer does
    # (an approval app would send the same event: POST /v1/events).
    deadline = time.monotonic() + 60
    while run.last.get().wait is None:
        if time.monotonic() > deadline:
            raise TimeoutError("the order never waited for its approval")
        time.sleep(0.2)
    with Client.from_env() as client:
        client.send_event("order.approved", {"order": order["id"], "by": "ann"})
    done = run.result(timeout=60)
    total = run.tasks[0].result()["total"]
    charge, shipment = done["charge"], done["shipment"]
    print(f"order {done['order']}: {total:.2f} charged as {charge['payment']}")
    print(f"approved by {done['approved_by']}")
    print(f"charged in attempt {charge['attempt']}, shipped in attempt {shipment['attempt']}")
    print(f"tracking {shipment['tracking']}")
    fulfilled = run.last.get()  # the task's record: its steps and attempts
    steps = ", ".join(f"{step.name} (attempt {step.attempt})" for step in fulfilled.steps)
    print(f"steps: {steps}")
    print("attempts:", ", ".join(attempt.outcome.value for attempt in fulfilled.attempts))


if __name__ == "__main__":
    with one_line_errors():
        main()
