"""Single enqueues through the SDK with many in flight, against taskiq's ``kiq()`` (issue 20).

Starts a managed Redis and one gateway process, then, in alternating rounds in one sitting:

- ``AsyncClient.enqueue`` with ``--in-flight`` calls at a time into a paused queue, coalescing
  off (``linger=None``: one request per task, as before issue 20), on as by default
  (``linger=0``: a call that meets a request in flight joins the next batch; ``--windows``
  compares how many requests may be in flight before calls wait), and with ``linger=0.002``;
- the blocking ``Client.enqueue`` from ``--threads`` threads, coalescing off and as by
  default;
- the default async and blocking clients again with ``enqueue_receipt`` (what ``.delay()``
  sends since the minimal answers: ``Prefer: return=minimal``, a TaskReceipt per task);
- taskiq's ``await noop.kiq()`` with the same number in flight, on the same Redis (the broker
  of ``bench/peer_taskiq.py``, no worker running, as ``bench/peers.py`` measures enqueues).

Prints tasks per second and the producer's CPU per task (this process), medians of the rounds,
and each rate's ratio to taskiq's (the median of the rounds' ratios); and the wall time of lone
enqueues made one after another, coalescing off and on in turn (coalescing must not add
latency to a call that meets nothing in flight). taskiq is measured only when it is installed (the
``bench`` extra). Run: ``.venv/bin/python -m bench.probes.producer`` (``--tasks``, ``--rounds``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench.e2e import KEY, NOOP, jobgate
from gateway.serving.redis_server import ManagedRedis
from sdk import AsyncClient, Client, TaskCreate, coalescing

QUEUE = "enqueue-many"

Measure = Callable[[int], float]
"""Runs ``count`` enqueues; returns the seconds they took."""


def _request() -> TaskCreate:
    """What ``client.enqueue(QUEUE, NOOP)`` builds, for the receipt variants."""
    return TaskCreate.model_validate({"name": NOOP, "payload": None})


def _async(url: str, in_flight: int, linger: float | None, receipts: bool = False) -> Measure:
    """``receipts``: ``enqueue_receipt`` (what ``.delay_async()`` sends: ``Prefer:
    return=minimal``) instead of ``enqueue`` (a whole Task per call)."""

    def measure(count: int) -> float:
        async def run() -> float:
            async with AsyncClient(url, KEY, timeout=60, linger=linger) as client:
                gate = asyncio.Semaphore(in_flight)

                async def one() -> None:
                    async with gate:
                        if receipts:
                            await client.enqueue_receipt(QUEUE, _request())
                        else:
                            await client.enqueue(QUEUE, NOOP)

                await asyncio.gather(*(one() for _ in range(100)))  # connect, warm up
                start = time.perf_counter()
                await asyncio.gather(*(one() for _ in range(count)))
                return time.perf_counter() - start

        return asyncio.run(run())

    return measure


def _threads(url: str, threads: int, linger: float | None, receipts: bool = False) -> Measure:
    def measure(count: int) -> float:
        with Client(url, KEY, timeout=60, linger=linger) as client:
            left = iter(range(count))
            lock = threading.Lock()

            def work() -> None:
                while True:
                    with lock:
                        if next(left, None) is None:
                            return
                    if receipts:
                        client.enqueue_receipt(QUEUE, _request())
                    else:
                        client.enqueue(QUEUE, NOOP)

            for _ in range(threads):
                client.enqueue(QUEUE, NOOP)
            with ThreadPoolExecutor(threads) as pool:
                start = time.perf_counter()
                for _ in range(threads):
                    pool.submit(work)
                pool.shutdown(wait=True)
                return time.perf_counter() - start

    return measure


def _lone(url: str, count: int) -> dict[str, list[float]]:
    """Milliseconds of ``count`` enqueues each made one after another (none in flight), through
    a client with coalescing off and one with the default, call by call in turn."""

    async def run() -> dict[str, list[float]]:
        took: dict[str, list[float]] = {"coalescing off": [], "linger=0 (default)": []}
        async with (
            AsyncClient(url, KEY, timeout=60, linger=None) as off,
            AsyncClient(url, KEY, timeout=60) as on,
        ):
            clients = {"coalescing off": off, "linger=0 (default)": on}
            for client in clients.values():
                for _ in range(50):
                    await client.enqueue(QUEUE, NOOP)
            for _ in range(count):
                for name, client in clients.items():
                    start = time.perf_counter()
                    await client.enqueue(QUEUE, NOOP)
                    took[name].append((time.perf_counter() - start) * 1e3)
        return took

    return asyncio.run(run())


def _windowed(window: int, measure: Measure) -> Measure:
    """``measure`` with :data:`sdk.coalescing.WINDOW` set to ``window`` meanwhile."""

    def windowed(count: int) -> float:
        kept, coalescing.WINDOW = coalescing.WINDOW, window
        try:
            return measure(count)
        finally:
            coalescing.WINDOW = kept

    return windowed


def _taskiq(in_flight: int) -> Measure:
    from bench import peer_taskiq

    def measure(count: int) -> float:
        async def run() -> float:
            await peer_taskiq.broker.startup()
            try:
                gate = asyncio.Semaphore(in_flight)

                async def one() -> None:
                    async with gate:
                        await peer_taskiq.noop.kiq()

                await asyncio.gather(*(one() for _ in range(100)))
                start = time.perf_counter()
                await asyncio.gather(*(one() for _ in range(count)))
                return time.perf_counter() - start
            finally:
                await peer_taskiq.broker.shutdown()

        return asyncio.run(run())

    return measure


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--in-flight", type=int, default=64)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument(
        "--windows", type=int, nargs="+", help="coalescing windows to compare (default: the SDK's)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, ManagedRedis(Path(tmp)) as redis:
        os.environ["BENCH_REDIS_URL"] = redis.url
        with jobgate(redis.url, 0, 1, 64) as (urls, _cpu):
            with Client(urls[0], KEY) as admin:
                admin.put_queue(QUEUE, paused=True)
            url = urls[0]
            n, t = args.in_flight, args.threads
            candidates: dict[str, Measure] = {
                f"AsyncClient, {n} in flight, coalescing off": _async(url, n, None),
            }
            for window in args.windows or [coalescing.WINDOW]:
                name = f"AsyncClient, {n} in flight, linger=0 (default), window {window}"
                candidates[name] = _windowed(window, _async(url, n, 0.0))
            name = f"AsyncClient, {n} in flight, linger=0 (default), receipts (.delay_async())"
            candidates[name] = _async(url, n, 0.0, receipts=True)
            candidates[f"AsyncClient, {n} in flight, linger=0.002"] = _async(url, n, 0.002)
            candidates[f"Client, {t} threads, coalescing off"] = _threads(url, t, None)
            candidates[f"Client, {t} threads, linger=0 (default)"] = _threads(url, t, 0.0)
            name = f"Client, {t} threads, linger=0 (default), receipts (.delay())"
            candidates[name] = _threads(url, t, 0.0, receipts=True)
            try:
                candidates[f"taskiq kiq(), {args.in_flight} in flight"] = _taskiq(args.in_flight)
            except ImportError:
                print("taskiq is not installed (the bench extra): measured without it")
            rates: dict[str, list[float]] = {name: [] for name in candidates}
            cpus: dict[str, list[float]] = {name: [] for name in candidates}
            for _ in range(args.rounds):
                for name, measure in candidates.items():
                    cpu = time.process_time()
                    seconds = measure(args.tasks)
                    cpus[name].append((time.process_time() - cpu) / args.tasks * 1e6)
                    rates[name].append(args.tasks / seconds)
            lone = _lone(url, 2000)
    print("| a lone AsyncClient.enqueue, one after another | p50 ms | p99 ms |")
    print("| --- | --: | --: |")
    for name, took in lone.items():
        cuts = statistics.quantiles(took, n=100)
        print(f"| {name} | {cuts[49]:.2f} | {cuts[98]:.2f} |")
    print()
    peer = next((n for n in rates if n.startswith("taskiq")), None)
    print("| producer | tasks/s (median) | rounds | producer CPU µs per task | ÷ taskiq |")
    print("| --- | --: | --- | --: | --: |")
    for name, values in rates.items():
        median = statistics.median(values)
        ratio = "-"
        if peer:  # the median of the rounds' ratios: each round's figures share a load
            each = [v / p for v, p in zip(values, rates[peer], strict=True)]
            ratio = f"{statistics.median(each):.2f}x"
        rounds = ", ".join(f"{v:,.0f}" for v in values)
        cpu = statistics.median(cpus[name])
        print(f"| {name} | {median:,.0f} | {rounds} | {cpu:.0f} | {ratio} |")


if __name__ == "__main__":
    main()
