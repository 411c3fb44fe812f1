"""What the peers' tasks POST to the user's service in the HTTP race (``bench/service_app.py``):
the shape and size of a Jobgate push of the same no-op task. A module of its own so that the
peers' worker processes import nothing else of the benchmark."""

from __future__ import annotations

import json

BODY = json.dumps(
    {
        "id": "01JQ3W6R8Y4N2M5K7P9T1V3X5Z",
        "queue": "http",
        "name": "bench.worker_app.noop",
        "payload": {},
        "attempt": 1,
        "checkpoint": None,
        "lease_expires_at": "2026-11-26T20:00:30.000000+00:00",
        "deadline": "2026-11-27T20:00:00.000000+00:00",
    },
    separators=(",", ":"),
).encode()
PATH = "/peer"  # the service's route for it
