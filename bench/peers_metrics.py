"""What ``bench/peers.py`` measures: its metrics and the names of Jobgate's variants.

Pure names, no processes: the harness records under them, the report and the targets
(``bench/peers_targets.py``) read them back.
"""

from __future__ import annotations

from bench.e2e import BATCH_SIZE
from bench.peers_report import JOBGATE, Metric

RACE_TITLES = {
    "python": "(a) Python functions",
    "http": "(b) HTTP service",
}
# CPU roles, in the order the tables list them; "total" is their sum.
ROLES = ("redis", "gateway", "worker", "service", "producer", "total")

ONE = f"{JOBGATE}, one push each"
BATCHED = f"{JOBGATE}, pushes of up to {BATCH_SIZE}"
BATCHES_500 = f"{JOBGATE}, batches of 500"  # Client.enqueue_batch_receipts
BATCHES_500_TASKS = f"{JOBGATE}, batches of 500, whole Tasks"  # Client.enqueue_batch
SINGLE = f"{JOBGATE}, 1 per request"
COALESCED = f"{JOBGATE}, single enqueues (SDK defaults, coalesced)"
IMPORT_SDK = f"{JOBGATE}, import sdk"
# The enqueue call's own answer, idle (bench/enqueue_answers.py): the ways a producer enqueues.
ENQUEUE_CALL = f"{JOBGATE}, AsyncClient.enqueue"
DELAY = f"{JOBGATE}, .delay()"
PLAIN_POST = f"{JOBGATE}, plain HTTP POST"

ENQUEUE = Metric("enqueue", "tasks/s")
P50 = Metric("enqueue to start, idle, p50", "ms", higher_is_better=False)
P99 = Metric("enqueue to start, idle, p99", "ms", higher_is_better=False)
ANSWER_P50 = Metric("the enqueue call's answer, idle, p50", "ms", higher_is_better=False)
ANSWER_P99 = Metric("the enqueue call's answer, idle, p99", "ms", higher_is_better=False)
QUEUED = Metric("Redis memory per queued no-op task", "bytes", higher_is_better=False)
IMPORT = Metric("import of the producer's library, fresh interpreter", "s", higher_is_better=False)


def single_in_flight(in_flight: int) -> str:
    """Jobgate's single enqueues as the SDK sends them by default (concurrent calls coalesced
    into batch requests, sdk/coalescing.py), named with their concurrency."""
    return f"{COALESCED}, {in_flight} in flight"


def drain_metric(race: str, processes: int) -> Metric:
    plural = "es" if processes > 1 else ""
    return Metric(f"{RACE_TITLES[race]}: drain, {processes} worker process{plural}", "tasks/s")


def cpu_metric(race: str, role: str, processes: int) -> Metric:
    return Metric(
        f"{RACE_TITLES[race]}: CPU per task, {role}, {processes} process(es)",
        "µs, enqueue + drain",
        higher_is_better=False,
    )


def enqueue_cpu_metric(role: str) -> Metric:
    """CPU per single enqueue (64 in flight) of one of Jobgate's roles."""
    return Metric(f"CPU per single enqueue, {role}", "µs", higher_is_better=False)
