"""Micro-benchmark of the gateway's per-task push code that mypyc would compile: building a
batch push body around 32 leases, and splitting and judging the worker's answer to it.

Prints µs per task of CPU for each, and whether the modules were loaded compiled (a ``.so``) or
as pure Python. Compare a pure tree against a mypyc-built copy (``bench/probes/mypyc_build.sh``)
in one sitting, alternating: ``PYTHONPATH=<tree> .venv/bin/python -m bench.probes.mypyc_micro``.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable

from ulid import ULID

from gateway.dispatch import pusher, verdict
from gateway.dispatch.pusher import batch_body
from gateway.dispatch.verdict import Answer, batch_answers, judge
from gateway.store.records import Lease

SIZE = 32


def leases() -> list[Lease]:
    now_ms = int(time.time() * 1000)
    return [
        Lease(
            queue="bench",
            task_id=str(ULID()),
            endpoint_id="ep_1",
            token=f"lease-{i}",
            name="noop",
            attempt=1,
            max_attempts=None,
            payload_json='{"args":[],"kwargs":{}}',
            checkpoint_json=None,
            expires_ms=now_ms + 30_000,
            deadline_ms=now_ms + 3_600_000,
            traceparent="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            ready_ms=now_ms,
            secrets=("whsec_x",),
        )
        for i in range(SIZE)
    ]


def answer(ids: list[str]) -> Answer:
    results = [{"id": i, "status": 200, "result": None} for i in ids]
    return Answer(200, json.dumps({"results": results}).encode(), "application/json")


def per_task(work: Callable[[], object], rounds: int) -> float:
    """Median over 5 samples of µs of CPU per task for ``work`` (one batch of SIZE)."""
    samples = []
    for _ in range(5):
        started = time.process_time()
        for _ in range(rounds):
            work()
        samples.append((time.process_time() - started) / rounds / SIZE * 1e6)
    return statistics.median(samples)


def main() -> None:
    batch = leases()
    ids = [lease.task_id for lease in batch]
    got = answer(ids)
    build = per_task(lambda: batch_body(batch, "http://127.0.0.1:8000"), 2000)
    judged = per_task(lambda: [judge(a) for a in batch_answers(got, ids)], 2000)
    compiled = all(m.__file__ and m.__file__.endswith(".so") for m in (pusher, verdict))
    print(f"{'compiled' if compiled else 'pure'}: batch_body {build:.2f} µs/task, ", end="")
    print(f"batch_answers+judge {judged:.2f} µs/task")


if __name__ == "__main__":
    main()
