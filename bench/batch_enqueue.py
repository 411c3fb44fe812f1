"""Batch enqueue: tasks per second, and where each task's CPU goes (issue 20: ≥ 25,000/s).

Each run is a fresh system, as ``bench.enqueue_cpu`` makes it: a managed Redis (AOF
``everysec``, the default) and one gateway (``jobgate serve``, its defaults) with one paused
queue. A producer process (the SDK's blocking ``Client``, keep-alive, one request at a time, as
``make bench`` enqueues its drains; ``--in-flight N``: N threads sharing it) sends ``--warmup``
and then ``--count`` small tasks in batches of ``--size`` (``POST .../tasks/batch``). Printed
per run: tasks per second, and µs of CPU per task of the producer (its ``time.process_time``,
building the requests and reading the answers), the gateway and Redis (their ``/proc`` utime +
stime over the measured batches), and the serial bound (one over their sum, tasks/s). One
request at a time, the three take turns: the rate is about that bound, less the wake-ups
between them; with two at once, they overlap on two cores.

Batches are sent as a producer that keeps ids calls it: ``Client.enqueue_batch_receipts`` (the
minimal answer, ``Prefer: return=minimal``: a TaskReceipt per task) in every tree whose SDK has
it; a tree without it sends the plain batch (each run prints which it sent). ``--whole-tasks``
times ``Client.enqueue_batch`` instead (a whole Task per task). (``--minimal``, the default
now, is still taken.)

``--trees A B …`` runs the gateway and the producer from other source trees (``git archive
<commit> | tar -x -C …``), alternating A, B, A, B, … for ``--rounds`` rounds, and prints
medians and ratios to the first tree. ``--profile DIR`` records the gateway's measured window
with py-spy (costs the gateway CPU: read those runs as profiles).

Run: ``.venv/bin/python -m bench.batch_enqueue`` (``--quick``: one run).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the `bench` folder importable as a package
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.enqueue_cpu import KEY, QUEUE, ROOT, alternate, gateway
from bench.proc_stat import cpu_seconds

FIGURES = ("tasks/s", "producer µs/task", "gateway µs/task", "redis µs/task", "serial bound")
"""``serial bound``: one over the three CPU figures' sum, in tasks/s: the rate one request at a
time allows when each process gets a core as soon as its turn comes. A load that delays the
turns moves the measured rate, much less this."""

# The producer, run with the tree's own SDK: it sends the batches and prints what it measured.
PRODUCER = """
import json, sys, time
from concurrent.futures import ThreadPoolExecutor
from sdk import Client, TaskCreate
url, queue, key, size, warmup, count, in_flight, minimal = sys.argv[1:9]
size, warmup, count, in_flight = int(size), int(warmup), int(count), int(in_flight)
batch = [TaskCreate(name="bench.worker_app.noop", payload={"n": 1}) for _ in range(size)]
with Client(url, key, timeout=60) as client, ThreadPoolExecutor(in_flight) as threads:
    minimal = minimal == "1" and hasattr(client, "enqueue_batch_receipts")
    enqueue = client.enqueue_batch_receipts if minimal else client.enqueue_batch
    send = lambda _: enqueue(queue, batch)
    # One at a time in this thread: a pool of one thread added 8 µs of CPU per task.
    run = (lambda n: [send(i) for i in range(0, n, size)]) if in_flight == 1 else (
        lambda n: list(threads.map(send, range(0, n, size))))
    run(warmup)
    print("go", flush=True)
    sys.stdin.readline()
    cpu, wall = time.process_time(), time.perf_counter()
    run(count)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
print(json.dumps({"wall": wall, "cpu": cpu, "minimal": minimal}), flush=True)
"""


def measure(tree: Path, args: argparse.Namespace, profile: Path | None) -> dict[str, float]:
    sizes = [str(args.size), str(args.warmup), str(args.count), str(args.in_flight)]
    sizes.append("0" if args.whole_tasks else "1")
    with gateway(tree) as (url, pid, redis_pid):
        producer = subprocess.Popen(
            [sys.executable, "-c", PRODUCER, url, QUEUE, KEY, *sizes],
            env={**os.environ, "PYTHONPATH": str(tree)},
            cwd=tree,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert producer.stdin is not None
        assert producer.stdout is not None
        if producer.stdout.readline().strip() != "go":
            raise SystemExit("the producer failed while warming up")
        spy = None
        if profile is not None:
            record = ["record", "--pid", str(pid), "--rate", "250", "--nonblocking"]
            spy = subprocess.Popen(
                [args.py_spy, *record, "--format", "speedscope", "--output", str(profile)],
                stdout=subprocess.DEVNULL,
            )
            time.sleep(1)  # py-spy attaches
        before = cpu_seconds(pid), cpu_seconds(redis_pid)
        producer.stdin.write("\n")
        producer.stdin.flush()
        found = json.loads(producer.stdout.readline())
        after = cpu_seconds(pid), cpu_seconds(redis_pid)
        if producer.wait(30) != 0:
            raise SystemExit("the producer failed")
        if spy is not None:
            spy.send_signal(2)  # SIGINT: py-spy writes its file
            spy.wait(60)
    count = args.count // args.size * args.size
    answer = "minimal" if found["minimal"] else "full"
    print(f"{tree}: {count / found['wall']:,.0f} tasks/s, {answer} answers", flush=True)
    figures = {
        "tasks/s": count / found["wall"],
        "producer µs/task": found["cpu"] / count * 1e6,
        "gateway µs/task": (after[0] - before[0]) / count * 1e6,
        "redis µs/task": (after[1] - before[1]) / count * 1e6,
    }
    spent = sum(v for k, v in figures.items() if k.endswith("µs/task"))
    figures["serial bound"] = 1e6 / spent if spent > 0 else 0.0
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trees", nargs="+", type=Path, default=[ROOT])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--size", type=int, default=500, help="tasks per request (≤ 1000)")
    parser.add_argument("--count", type=int, default=50_000)
    parser.add_argument(
        "--in-flight", type=int, default=1, help="requests at once (threads sharing the client)"
    )
    parser.add_argument("--warmup", type=int, default=5_000)
    parser.add_argument(
        "--minimal", action="store_true", help="receipts (Prefer: return=minimal): the default"
    )
    parser.add_argument(
        "--whole-tasks", action="store_true", help="Client.enqueue_batch: a whole Task per task"
    )
    parser.add_argument("--profile", type=Path, help="a folder for py-spy's speedscope files")
    parser.add_argument("--py-spy", default=shutil.which("py-spy") or "py-spy")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.count, args.warmup = 1, 10_000, 2_000
    trees = [t.resolve() for t in args.trees]
    print(f"load average (1 min) at the start: {os.getloadavg()[0]:.1f}", flush=True)
    runs = alternate(trees, args, measure, prefix="batch-")
    print(f"load average (1 min) at the end: {os.getloadavg()[0]:.1f}")
    print(
        f"\n{args.rounds} round(s), {args.count:,} tasks in batches of {args.size} each, "
        f"{args.in_flight} request(s) at once.\n"
    )
    print("| tree | " + " | ".join(f"{f} (runs)" for f in FIGURES) + " | tasks/s ÷ first |")
    print("| --- |" + " --- |" * len(FIGURES) + " --: |")
    first = statistics.median(r["tasks/s"] for r in runs[trees[0]])
    for tree in trees:
        cells = []
        for figure in FIGURES:
            values = [r[figure] for r in runs[tree]]
            shown = ", ".join(f"{v:,.1f}" for v in values)
            cells.append(f"**{statistics.median(values):,.1f}** ({shown})")
        rate = statistics.median(r["tasks/s"] for r in runs[tree])
        print(f"| {tree} | " + " | ".join(cells) + f" | {rate / first:.3f} |")


if __name__ == "__main__":
    main()
