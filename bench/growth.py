"""How cost grows (issue 32, item 4): a drain and enqueue-to-start beside a one-queue baseline,
at many busy queues, at many scheduled tasks and at many jobs.

Each case compares a loaded system with its baseline, each a fresh system (a managed Redis,
one gateway and the bench worker: ``bench.e2e.jobgate``), the two alternated within each of
``--repeat`` runs (baseline first in odd runs, loaded first in even ones):

- **queues**: the drain spread over ``--queues`` queues (1,000) all busy at once, against the
  same tasks in one queue. Every queue has the same policy and an endpoint on the bench worker
  (``--concurrency`` 128 each, as a thousand services each with its own worker would have),
  signed with one secret (the worker would otherwise try a thousand). So that a thousand queues
  turn busy at once, both sides' tasks are enqueued due ``--hold`` seconds later, and the
  measure begins at that moment;
- **scheduled**: ``--scheduled`` tasks (1,000,000) delayed by 30 days in the drained queue,
  against none;
- **jobs**: ``--jobs`` recurring jobs (10,000: half every hour, half a daily crontab twelve
  hours away, none firing while measured) on the drained queue, against none.

Measured in each system: for the scheduled and jobs cases first the idle cost over
``--window`` seconds (the gateway's CPU, Redis's commands/s: the recoverer and the job-firing
loop must not grow with what is held); then the drain: ``--drain`` no-op tasks enqueued into
the paused queue (or, in the queues case, due later: above), which is then resumed, and from
that moment until the worker has run them all: tasks/s, the gateway's and Redis's CPU per task
(``/proc``) and Redis's commands per task (``INFO stats``, the scripts' own commands counted
too: a figure the machine's load does not move); meanwhile ``--probes`` stamp tasks sent into
a queue of their own at ``--rate`` per second give enqueue to start, p50 and p99. Prints each
case's table and the targets, met or not, as Markdown (``bench/growth_report.py``). Run:
``.venv/bin/python -m bench.growth`` (``--quick``: smaller sizes, one run; ``--cases``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import redis

from bench.e2e import KEY, NOOP, enqueue_batches, jobgate
from bench.growth_report import Case, Runs, case_table, targets_table
from bench.latency import percentiles, stamps
from gateway.serving.redis_server import ManagedRedis
from sdk import AsyncClient, Client, TaskCreate

PROBE = "probe"
HELD = timedelta(days=30)


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


@dataclass
class Bench:
    """One running system: gateway URL, CPU reader, Redis, the worker's URL."""

    url: str
    cpu: Callable[[], dict[str, float]]
    redis: redis.Redis
    worker: str

    def done(self) -> int:
        """No-op tasks the worker has run."""
        return int(httpx.get(self.worker + "done").text)


@contextmanager
def system() -> Iterator[Bench]:
    with tempfile.TemporaryDirectory() as tmp, ManagedRedis(Path(tmp)) as server:
        pid = server.process.pid if server.process else 0
        with (
            jobgate(server.url, pid, 1, 128, extra_queues=(PROBE,)) as (urls, cpu),
            Client(urls[0], KEY) as admin,
            redis.Redis.from_url(server.url) as r,
        ):
            worker = admin.list_endpoints("bench")[0].url
            assert worker is not None
            admin.patch_queue(PROBE, paused=False)
            bench = Bench(urls[0], cpu, r, worker)
            asyncio.run(stamps(bench.url, PROBE, 20, 50))  # warm up connections and caches
            yield bench


def drain_queues(bench: Bench, count: int, concurrency: int) -> list[str]:
    """``count`` paused queues like ``bench``, each endpoint's ``concurrency`` given, signed
    with ``bench``'s secret."""
    names = [f"grow-{i:04d}" for i in range(count)]
    with Client(bench.url, KEY) as admin:
        for name in names:
            admin.put_queue(name, max_concurrency=concurrency, paused=True)
            admin.add_endpoint(name, bench.worker, concurrency=concurrency)
    secrets = json.loads(next(iter(bench.redis.hgetall("jg:{bench}:endpoints").values())))
    for name in names:
        key = f"jg:{{{name}}}:endpoints"
        for field, raw in bench.redis.hgetall(key).items():
            record = json.loads(raw)
            record["secrets"] = secrets["secrets"]
            bench.redis.hset(key, field, json.dumps(record))
    return names


def hold_scheduled(bench: Bench, queue: str, count: int) -> None:
    later = TaskCreate(name=NOOP, run_at=datetime.now(UTC) + HELD)
    start = time.perf_counter()
    enqueue_batches([bench.url], count, queue, task=later)
    say(f"  {count:,} scheduled tasks in {time.perf_counter() - start:.0f} s")


def hold_jobs(bench: Bench, queue: str, count: int) -> None:
    far = (datetime.now(UTC).hour + 12) % 24

    async def run() -> None:
        async with AsyncClient(bench.url, KEY, timeout=60) as client:
            gate = asyncio.Semaphore(32)

            async def one(i: int) -> None:
                schedule: dict[str, object] = (
                    {"kind": "interval", "hours": 1}
                    if i % 2
                    else {"kind": "crontab", "minute": str(i % 60), "hour": str(far)}
                )
                async with gate:
                    await client.create_job(
                        title=f"job {i}", task={"queue": queue, "name": NOOP}, schedule=schedule
                    )

            await asyncio.gather(*(one(i) for i in range(count)))

    start = time.perf_counter()
    asyncio.run(run())
    say(f"  {count:,} jobs in {time.perf_counter() - start:.0f} s")


def idle(bench: Bench, window: float) -> dict[str, float]:
    """The gateway's CPU and Redis's commands/s over ``window`` seconds of no work."""
    time.sleep(2)  # the setup's last wake-ups settle
    before_total = int(bench.redis.info("stats")["total_commands_processed"])
    before = bench.cpu()["gateway0"]
    start = time.monotonic()
    time.sleep(window)
    elapsed = time.monotonic() - start
    cpu = bench.cpu()["gateway0"] - before
    # The first INFO is counted in the second's total; the second is not.
    total = int(bench.redis.info("stats")["total_commands_processed"]) - before_total - 1
    return {"idle gateway CPU": 100 * cpu / elapsed, "idle Redis commands": total / elapsed}


async def resume(url: str, queues: list[str]) -> None:
    async with AsyncClient(url, KEY, timeout=60) as client:
        gate = asyncio.Semaphore(32)

        async def one(queue: str) -> None:
            async with gate:
                await client.patch_queue(queue, paused=False)

        await asyncio.gather(*(one(q) for q in queues))


def drain(
    bench: Bench, queues: list[str], tasks: int, probes: int, rate: float, hold: float
) -> dict[str, float]:
    """Drain ``tasks`` no-op tasks spread over ``queues``, probed meanwhile. With ``hold``
    (seconds), they are enqueued into the running queues due ``hold`` seconds from now, so all
    queues turn busy at once when the recoverer promotes them; without, into the paused queues,
    then resumed (one request per queue: fine for one, too slow for a thousand)."""
    share, extra = divmod(tasks, len(queues))

    def fill(task: TaskCreate) -> None:
        for i, queue in enumerate(queues):
            enqueue_batches([bench.url], share + (i < extra), queue, task=task)

    if hold:
        asyncio.run(resume(bench.url, queues))
        due = time.time() + hold
        fill(TaskCreate(name=NOOP, run_at=datetime.fromtimestamp(due, UTC)))
        if time.time() > due - 0.5:
            raise SystemExit(f"the enqueue took longer than --hold ({hold:g} s): raise it")
        time.sleep(due - time.time())  # until the moment every task is due
    else:
        fill(TaskCreate(name=NOOP))
        asyncio.run(resume(bench.url, queues))
    commands = int(bench.redis.info("stats")["total_commands_processed"])
    start, before, first = time.perf_counter(), bench.cpu(), bench.done()
    delays = asyncio.run(stamps(bench.url, PROBE, probes, rate))
    if bench.done() >= tasks:
        say("  warning: the drain ended before the last probe was read back; enlarge --drain")
    deadline = time.monotonic() + 600
    while (done := bench.done()) < tasks:
        assert time.monotonic() < deadline, f"drained {done} of {tasks}"
        time.sleep(0.02)  # polling the worker's count: the drain takes seconds
    elapsed, after = time.perf_counter() - start, bench.cpu()
    commands = int(bench.redis.info("stats")["total_commands_processed"]) - commands
    counted = tasks - first
    say(f"  {first:,} of {tasks:,} drained before the measure began")
    p50, p99 = percentiles(delays)
    return {
        "drain": counted / elapsed,
        "gateway CPU per task": (after["gateway0"] - before["gateway0"]) / counted * 1e6,
        "Redis CPU per task": (after["redis"] - before["redis"]) / counted * 1e6,
        "enqueue to start p50": p50,
        "enqueue to start p99": p99,
        "Redis commands per task": commands / counted,
    }


@dataclass(frozen=True)
class Sizes:
    queues: int
    scheduled: int
    jobs: int
    drain: int
    probes: int
    rate: float
    window: float
    concurrency: int
    hold: float


def measure(case: str, loaded: bool, sizes: Sizes) -> dict[str, float]:
    """One system of ``case``, loaded or the baseline."""
    with system() as bench:
        count = sizes.queues if case == "queues" and loaded else 1
        queues = drain_queues(bench, count, sizes.concurrency)
        figures: dict[str, float] = {}
        if case == "scheduled" and loaded:
            hold_scheduled(bench, queues[0], sizes.scheduled)
        if case == "jobs" and loaded:
            hold_jobs(bench, queues[0], sizes.jobs)
        if case != "queues":
            figures.update(idle(bench, sizes.window))
        hold = sizes.hold if case == "queues" else 0
        figures.update(drain(bench, queues, sizes.drain, sizes.probes, sizes.rate, hold))
    return figures


def cases(sizes: Sizes) -> dict[str, Case]:
    return {
        "queues": Case(f"{sizes.queues:,} busy queues", "1 queue", f"{sizes.queues:,} queues"),
        "scheduled": Case(
            f"{sizes.scheduled:,} scheduled tasks", "none", f"{sizes.scheduled:,} scheduled"
        ),
        "jobs": Case(f"{sizes.jobs:,} jobs", "no job", f"{sizes.jobs:,} jobs"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="queues,scheduled,jobs")
    parser.add_argument("--queues", type=int, default=1000)
    parser.add_argument("--scheduled", type=int, default=1_000_000)
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--drain", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=128, help="of each endpoint")
    parser.add_argument("--probes", type=int, default=200)
    parser.add_argument("--rate", type=float, default=50.0, help="probes per second")
    parser.add_argument(
        "--hold", type=float, default=30.0, help="seconds the queues case's tasks wait (>enqueue)"
    )
    parser.add_argument("--window", type=float, default=30.0, help="idle seconds measured")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="smaller sizes, one run")
    args = parser.parse_args()
    if args.quick:
        args.queues, args.scheduled, args.jobs, args.drain = 200, 50_000, 1_000, 6_000
        args.probes, args.rate, args.window, args.repeat = 100, 100.0, 10.0, 1
    sizes = Sizes(
        args.queues,
        args.scheduled,
        args.jobs,
        args.drain,
        args.probes,
        args.rate,
        args.window,
        args.concurrency,
        args.hold,
    )
    named = cases(sizes)
    results: dict[Case, tuple[Runs, Runs]] = {}
    for name in args.cases.split(","):
        runs: dict[bool, list[dict[str, float]]] = {False: [], True: []}
        for run in range(args.repeat):
            for loaded in (False, True) if run % 2 == 0 else (True, False):
                say(f"{name}, run {run + 1}/{args.repeat}, {'loaded' if loaded else 'baseline'}")
                runs[loaded].append(measure(name, loaded, sizes))
                say(f"  {runs[loaded][-1]}")
        results[named[name]] = (runs[False], runs[True])
    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    print(
        f"\nHow cost grows: medians of {args.repeat} run(s), baseline and loaded alternated; "
        f"{sizes.drain:,} no-op tasks drained, {sizes.probes} probes at {sizes.rate:g}/s; "
        f"load average at the end {load}.\n"
    )
    for case, (baseline, loaded) in results.items():
        print(case_table(case, baseline, loaded) + "\n")
    print(targets_table(results))


if __name__ == "__main__":
    main()
