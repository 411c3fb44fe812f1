"""Gateway CPU per single enqueue (issue 20: at most 150 µs).

Each run is a fresh system: a managed Redis and one gateway (``jobgate serve``, its defaults:
uvicorn + httptools, metrics on, access log off) with an admin key and one paused queue (no
dispatch competing). A cheap client in this process (aiohttp, keep-alive, 64 in flight) sends
``--warmup`` and then ``--count`` single enqueues (``POST /v1/queues/{queue}/tasks``, a small
payload, each answered 201); the figure is the gateway process's utime + stime from ``/proc``
over the measured ones, divided by their count.

``--trees A B …`` runs the gateway from other source trees (e.g. ``git archive <commit> | tar
-x -C /tmp/before``), alternating A, B, A, B, … for ``--rounds`` rounds, and prints medians and
ratios to the first tree, so before and after are measured in one sitting.
``--profile DIR`` records each measured window with py-spy (``--format speedscope``; py-spy
on PATH or in ``--py-spy``), which costs the gateway CPU: read those runs' figures as
profiles, not measurements.

Run: ``.venv/bin/python -m bench.enqueue_cpu`` (``--quick``: one run of 2,000).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import aiohttp
import httpx

from gateway.serving.redis_server import ManagedRedis, free_port

if __package__ in (None, ""):  # run as a script: make the `bench` folder importable as a package
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.proc_stat import cpu_seconds

ROOT = Path(__file__).resolve().parents[1]
# Where a profiled sample's CPU went: the first of these a sample's stack meets, from its
# innermost frame outwards (so a socket write counts for whoever wrote).
SHARES = [
    ("Redis round trip (redis-py, coalescer, their socket I/O)", ("Coalescer.", "Pipeline.")),
    ("the enqueue store call (args, records, index)", ("Enqueuing.",)),
    ("task building (ids, records, trace)", ("new_task", "record_json")),
    ("answer: Task model, JSON, response, its write", ("_respond", "_created_view", "Response.")),
    ("answer: uvicorn's send, its write", ("RequestResponseCycle.send", "_OneWritePerTurn.")),
    ("body: read, parse, validate (pydantic)", ("read_model",)),
    ("auth, queue name, Idempotency-Key", ("authenticate", "_resolve_queue", "requested_key")),
    ("task service (directory, catalog, metrics)", ("TaskService.", "Enqueue.", "enqueue (")),
    ("route: endpoint, Call, params", ("endpoint.<locals>", "Call.")),
    ("Starlette app, middleware, router", ("starlette/", "RefuseFragments", "DirectRoute")),
    ("uvicorn: parse request, scope, ASGI task", ("HttpToolsProtocol", "_Protocol", "run_asgi")),
    ("background: directory refresh, loops", ("Directory._read", "Dispatcher", "Recover")),
]
KEY = "bench-admin-key-0123456789"
QUEUE = "enqueue-cpu"
BODY = json.dumps({"name": "bench.worker_app.noop", "payload": {"n": 1}}).encode()


@contextmanager
def gateway(tree: Path) -> Iterator[tuple[str, int, int]]:
    """A managed Redis and a gateway run from ``tree``; yields its URL, its process id and
    Redis's."""
    with tempfile.TemporaryDirectory() as tmp, ManagedRedis(Path(tmp)) as redis:
        port = free_port()
        env = {
            **os.environ,
            "PYTHONPATH": str(tree),
            "JOBGATE_REDIS_URL": redis.url,
            "JOBGATE_PORT": str(port),
            "JOBGATE_API_KEYS": json.dumps([{"key": KEY, "scopes": ["admin"]}]),
            "JOBGATE_LOG_LEVEL": "warning",
        }
        proc = subprocess.Popen([sys.executable, "-m", "gateway", "serve"], env=env, cwd=tree)
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 30
            while True:
                if proc.poll() is not None:
                    raise SystemExit(f"the gateway exited with {proc.returncode}")
                try:
                    if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise SystemExit("the gateway did not answer in 30 s")
                time.sleep(0.05)
            headers = {"authorization": f"Bearer {KEY}"}
            answer = httpx.put(f"{url}/v1/queues/{QUEUE}", json={"paused": True}, headers=headers)
            answer.raise_for_status()
            yield url, proc.pid, redis.process.pid if redis.process else 0
        finally:
            proc.terminate()
            proc.wait(15)


async def enqueue(url: str, count: int, in_flight: int) -> float:
    """Send ``count`` single enqueues, ``in_flight`` at a time; returns the seconds taken."""
    headers = {"authorization": f"Bearer {KEY}", "content-type": "application/json"}
    target = f"{url}/v1/queues/{QUEUE}/tasks"
    connector = aiohttp.TCPConnector(limit=in_flight)
    async with aiohttp.ClientSession(connector=connector, headers=headers) as session:
        left = count

        async def sender() -> None:
            nonlocal left
            while left > 0:
                left -= 1
                async with session.post(target, data=BODY) as answer:
                    await answer.read()
                    if answer.status != 201:
                        raise SystemExit(f"enqueue answered {answer.status}: {answer!r}")

        started = time.perf_counter()
        await asyncio.gather(*(sender() for _ in range(in_flight)))
        return time.perf_counter() - started


def measure(tree: Path, args: argparse.Namespace, profile: Path | None) -> dict[str, float]:
    with gateway(tree) as (url, pid, _):
        asyncio.run(enqueue(url, args.warmup, args.in_flight))
        spy = None
        if profile is not None:
            record = ["record", "--pid", str(pid), "--rate", "250"]
            record.append("--native" if args.native else "--nonblocking")
            spy = subprocess.Popen(
                [args.py_spy, *record, "--format", "speedscope", "--output", str(profile)],
                stdout=subprocess.DEVNULL,
            )
            time.sleep(1)  # py-spy attaches
        before = cpu_seconds(pid)
        took = asyncio.run(enqueue(url, args.count, args.in_flight))
        used = cpu_seconds(pid) - before
        if spy is not None:
            spy.send_signal(2)  # SIGINT: py-spy writes its file
            spy.wait(60)
    return {"gateway CPU µs per enqueue": used / args.count * 1e6, "enqueues/s": args.count / took}


def shares(speedscope: Path) -> dict[str, float]:
    """A py-spy speedscope profile's samples by where they went (:data:`SHARES`), in %, those
    waiting in ``epoll_wait`` left out."""
    found = json.loads(speedscope.read_text())
    frames = [
        f"{f['name']} ({f.get('file', '').rpartition('site-packages/')[2]})"
        for f in found["shared"]["frames"]
    ]
    totals: dict[str, float] = {}
    for profile in found["profiles"]:
        for stack, weight in zip(profile["samples"], profile["weights"], strict=True):
            if stack and frames[stack[-1]].startswith(("epoll_wait", "epoll_pwait")):
                continue  # waiting for the sockets: idle, though py-spy --native samples it
            where = "the event loop and the rest"
            for frame in reversed([frames[i] for i in stack]):
                named = next((n for n, marks in SHARES if any(m in frame for m in marks)), None)
                if named is not None:
                    where = named
                    break
            totals[where] = totals.get(where, 0.0) + weight
    whole = sum(totals.values())
    return {k: v / whole * 100 for k, v in sorted(totals.items(), key=lambda kv: -kv[1])}


Measure = Callable[[Path, argparse.Namespace, Path | None], dict[str, float]]


def alternate(
    trees: list[Path], args: argparse.Namespace, measure: Measure, prefix: str = ""
) -> dict[Path, list[dict[str, float]]]:
    """``measure`` each tree in turn, ``args.rounds`` times (a py-spy profile of each run in
    ``args.profile`` when given), printing each run's figures; returns them by tree."""
    runs: dict[Path, list[dict[str, float]]] = {t: [] for t in trees}
    for n in range(args.rounds):
        for i, tree in enumerate(trees):
            profile = None
            if args.profile is not None:
                args.profile.mkdir(parents=True, exist_ok=True)
                profile = args.profile / f"{prefix}tree{i}-round{n + 1}.speedscope.json"
            found = measure(tree, args, profile)
            runs[tree].append(found)
            shown = ", ".join(f"{k} {v:,.1f}" for k, v in found.items())
            print(f"round {n + 1}/{args.rounds}, {tree}: {shown}", flush=True)
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trees", nargs="+", type=Path, default=[ROOT])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--count", type=int, default=20_000)
    parser.add_argument("--warmup", type=int, default=2_000)
    parser.add_argument("--in-flight", type=int, default=64)
    parser.add_argument("--profile", type=Path, help="a folder for py-spy's speedscope files")
    parser.add_argument("--py-spy", default=shutil.which("py-spy") or "py-spy")
    parser.add_argument("--native", action="store_true", help="py-spy --native: C frames too")
    parser.add_argument("--shares", type=Path, help="only print where a profile's CPU went")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.shares is not None:
        for where, share in shares(args.shares).items():
            print(f"| {where} | {share:.1f} % |")
        return
    if args.quick:
        args.rounds, args.count, args.warmup = 1, 2_000, 500
    trees = [t.resolve() for t in args.trees]
    runs = alternate(trees, args, measure)
    if args.profile is not None:
        for path in sorted(args.profile.glob("*.speedscope.json")):
            print(f"\n{path.name}: share of the gateway's samples\n")
            for where, share in shares(path).items():
                print(f"| {where} | {share:.1f} % |")
    print(f"\n{args.rounds} round(s), {args.count:,} enqueues each, {args.in_flight} in flight.\n")
    print("| tree | gateway CPU µs per enqueue (runs) | median | ÷ first | enqueues/s |")
    print("| --- | --- | --: | --: | --: |")
    first = statistics.median(r["gateway CPU µs per enqueue"] for r in runs[trees[0]])
    for tree in trees:
        cpu = [r["gateway CPU µs per enqueue"] for r in runs[tree]]
        rate = statistics.median(r["enqueues/s"] for r in runs[tree])
        median = statistics.median(cpu)
        shown = ", ".join(f"{c:.0f}" for c in cpu)
        print(f"| {tree} | {shown} | {median:.0f} | {median / first:.3f} | {rate:,.0f} |")


if __name__ == "__main__":
    main()
