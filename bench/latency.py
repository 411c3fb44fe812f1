"""Enqueue to start, on its own: how long from "enqueue sent" to "the worker's task began".

Starts a managed Redis (AOF everysec), one gateway and the bench SDK worker (``bench/e2e.py``'s
``system``), then, in this order:

- **idle**: ``--samples`` stamp tasks into the one-push queue ``bench`` at ``--rate`` per second
  (an open loop: each is sent on time whether or not the previous one was answered), one
  SDK async client;
- **busy**: the same while the queue ``bench-batch`` (pushes of up to 32) drains a backlog of
  ``--backlog`` no-op tasks through the same gateway and worker;
- **backlog in the queue**: the same again while ``bench`` itself drains ``--backlog`` no-op
  tasks enqueued in batches of 500 just before (the stamps wait their turn: this shows the
  queueing, and that dispatch still batches its claims);
- with ``--one-at-a-time N``: N stamp tasks each sent once the previous one finished (a
  closed loop: no queue forms on a loaded machine, where an open loop at ``--rate`` may);
- the CPU the gateway and Redis spent per task during the idle run (each stamp task is also
  read back once, by a long poll: the same for both trees);
- **the enqueue's answer**, idle: ``--samples`` stamp tasks at ``--rate`` each way a producer
  enqueues (``bench/enqueue_answers.py``: ``AsyncClient.enqueue``, a task's ``.delay()``, a
  plain HTTP POST), how long the call took to return and enqueue to start;
- **drain**: ``--backlog`` no-op tasks enqueued in batches of 500 into ``bench`` while it
  dispatches, tasks/s from the first enqueue until all succeeded (as ``e2e.end_to_end``).

Each stamp task returns ``time.time()`` when it starts; the results are read back afterwards.
Prints one JSON line of figures (ms, tasks/s), for ``bench/run.sh``-style alternating runs of
two trees (copy this file into the other tree and run it there: the gateway runs from the
tree the script is in).

Run: ``.venv/bin/python bench/latency.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the `bench` folder importable as a package
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.e2e import KEY, STAMP, enqueue_batches, system
from bench.enqueue_answers import PlainPost, timed, ways
from sdk import AsyncClient, Client, TaskState

WARM_UP = 100


async def stamps(url: str, queue: str, samples: int, rate: float) -> list[float]:
    """Enqueue-to-start delays (ms) of ``samples`` stamp tasks sent at ``rate`` per second."""
    async with AsyncClient(url, KEY, timeout=60) as client:

        async def send(index: int) -> str:
            return (await client.enqueue(queue, STAMP)).id

        return (await timed(send, samples, rate, client))[0]


async def one_at_a_time(url: str, queue: str, samples: int) -> list[float]:
    """Enqueue-to-start delays (ms) of stamp tasks sent one at a time, each once the previous
    one has finished: a closed loop, so no queue can form whatever the machine's load."""
    found = []
    async with AsyncClient(url, KEY, timeout=60) as client:
        for _ in range(samples):
            sent = time.time()
            task = await client.enqueue(queue, STAMP)
            started = (await client.wait(task.id, timeout=60)).result
            assert isinstance(started, float), started
            found.append((started - sent) * 1000)
    return found


async def answers(url: str, samples: int, rate: float) -> dict[str, list[float]]:
    """Each way in (``bench/enqueue_answers.py``) in turn: enqueue to start, and the enqueue
    call's own answer (ms)."""
    found: dict[str, list[float]] = {}
    plain = PlainPost(url)
    try:
        async with AsyncClient(url, KEY, timeout=60) as reader:
            with Client(url, KEY, timeout=60) as client:
                for way, send in ways(reader, client, plain).items():
                    started, answered = await timed(send, samples, rate, reader)
                    found[f"{way}: start"], found[f"{way}: answer"] = started, answered
    finally:
        plain.close()
    return found


def succeeded(admin: Client, queue: str) -> int:
    return admin.get_queue(queue).counts[TaskState.SUCCEEDED]


def wait_drained(admin: Client, queue: str, count: int) -> None:
    """Until ``count`` tasks of ``queue`` have succeeded in all."""
    deadline = time.monotonic() + 300
    while succeeded(admin, queue) < count:
        assert time.monotonic() < deadline, f"{queue} did not drain"
        time.sleep(0.02)


def percentiles(found: list[float]) -> tuple[float, float]:
    found = sorted(found)
    return statistics.median(found), found[min(len(found) - 1, round(0.99 * len(found)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=200.0)
    parser.add_argument("--backlog", type=int, default=10_000)
    parser.add_argument(
        "--idle-only", action="store_true", help="only the idle figures (quicker: more runs)"
    )
    parser.add_argument(
        "--one-at-a-time",
        type=int,
        default=0,
        metavar="N",
        help="also N stamp tasks one at a time, each after the previous finished",
    )
    args = parser.parse_args()
    figures: dict[str, float] = {}
    with system(1, worker_concurrency=128) as (urls, cpu), Client(urls[0], KEY) as admin:
        url = urls[0]
        # Warm up: connections, caches, the worker's first pushes.
        admin.patch_queue("bench", paused=False)
        asyncio.run(stamps(url, "bench", WARM_UP, args.rate))
        before = cpu()
        figures["idle p50"], figures["idle p99"] = percentiles(
            asyncio.run(stamps(url, "bench", args.samples, args.rate))
        )
        after = cpu()
        for name in ("gateway0", "redis"):
            per_task = (after[name] - before[name]) / args.samples * 1e6
            figures[f"idle {name.removesuffix('0')} CPU per task (µs)"] = per_task
        for name, found in asyncio.run(answers(url, args.samples, args.rate)).items():
            figures[f"idle, {name} p50"], figures[f"idle, {name} p99"] = percentiles(found)
        if args.one_at_a_time:
            figures["one at a time p50"], figures["one at a time p99"] = percentiles(
                asyncio.run(one_at_a_time(url, "bench", args.one_at_a_time))
            )
        if args.idle_only:
            print(json.dumps({k: round(v, 3) for k, v in figures.items()}), flush=True)
            return

        enqueue_batches(urls, args.backlog, "bench-batch")
        admin.patch_queue("bench-batch", paused=False)
        busy = asyncio.run(stamps(url, "bench", min(args.samples, 500), args.rate))
        figures["busy p50"], figures["busy p99"] = percentiles(busy)
        wait_drained(admin, "bench-batch", args.backlog)

        admin.patch_queue("bench", paused=True)
        enqueue_batches(urls, args.backlog, "bench")
        admin.patch_queue("bench", paused=False)
        queued = asyncio.run(stamps(url, "bench", min(args.samples, 500), args.rate))
        figures["behind a backlog p50"], figures["behind a backlog p99"] = percentiles(queued)

        sent = WARM_UP + args.samples + 2 * min(args.samples, 500) + args.backlog
        wait_drained(admin, "bench", sent)
        start = time.perf_counter()
        enqueue_batches(urls, args.backlog, "bench")
        wait_drained(admin, "bench", sent + args.backlog)
        figures["drain while enqueuing (tasks/s)"] = args.backlog / (time.perf_counter() - start)
    print(json.dumps({k: round(v, 3) for k, v in figures.items()}), flush=True)


if __name__ == "__main__":
    main()
