"""Enqueue to start of a quiet queue beside a busy one: where does the probe's time go?

Starts a managed Redis, one gateway and the bench SDK worker (``bench.e2e.jobgate``, endpoint
concurrency ``--concurrency``), with a queue ``probe`` beside ``bench``. With ``--worker own``
the probe queue's endpoint is a second worker process of its own; with ``shared`` (the default,
as ``bench/growth.py`` runs it) it is the busy queue's worker URL. Then ``--probes`` stamp
tasks at ``--rate`` per second, first idle, then while ``bench`` drains ``--drain`` no-op tasks.
Each probe's time is split by the clocks of one machine: sent → the enqueue's answer read,
sent → ``created_at`` (the enqueue script ran: Redis's clock), → ``started_at`` (claimed),
→ the stamp task's own ``time.time()`` (the worker began). Also prints the CPU each process
spent per second of the busy run, and how long each process ran and waited for a CPU
(``/proc/<pid>/schedstat``: a process that ran plus waited for nearly all of the run always
had work, so what reaches it queues). With ``--turns``, also how long a callback made ready
waits for its turn of the gateway's event loop while busy (a sampler put in the gateway by a
``sitecustomize`` on its ``PYTHONPATH``; nothing in the tree changes).

Run: ``.venv/bin/python -m bench.probes.busy_neighbour --worker own``.
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
from pathlib import Path

from bench.e2e import KEY, ROOT, STAMP, enqueue_batches, jobgate, stop, wait_http
from bench.peers_session import paced
from bench.proc_stat import descendants, tree_cpu_seconds
from gateway.serving.redis_server import ManagedRedis, free_port
from sdk import AsyncClient, Client, TaskState

PROBE = "probe"

# With --turns: a sitecustomize for the gateway (it runs on ``uvloop.run``) that, every 10 ms,
# times one ``asyncio.sleep(0)``: how long a callback made ready then waits for its turn of the
# loop. The samples (seconds) go to $JG_TURNS.<pid> at exit.
TURNS = """
import os
if os.environ.get("JG_TURNS"):
    import asyncio, atexit, time, uvloop
    _run, _found = uvloop.run, []

    def _write():
        if _found:
            with open(f"{os.environ['JG_TURNS']}.{os.getpid()}", "w") as f:
                f.write("\\n".join(f"{t:.6f} {w:.6f}" for t, w in _found))

    async def _sample():
        while True:
            await asyncio.sleep(0.01)
            start = time.perf_counter()
            await asyncio.sleep(0)
            _found.append((time.time(), time.perf_counter() - start))

    def run(main, **kwargs):
        async def sampled():
            sampler = asyncio.create_task(_sample())
            try:
                return await main
            finally:
                sampler.cancel()
        atexit.register(_write)
        return _run(sampled(), **kwargs)

    uvloop.run = run
"""


async def probe(url: str, count: int, rate: float) -> dict[str, list[float]]:
    """Per probe (ms): answer, enqueued, claimed, worker began, each from the send."""
    rows: list[tuple[float, float, str]] = []
    async with AsyncClient(url, KEY, timeout=60) as client:

        async def one(index: int) -> None:
            sent = time.time()
            task = await client.enqueue(PROBE, STAMP)
            rows.append((sent, time.time(), task.id))

        await paced(count, rate, one)
        found: dict[str, list[float]] = {"answer": [], "enqueued": [], "claimed": [], "began": []}
        for sent, answered, task_id in rows:
            task = await client.wait(task_id, timeout=60)
            assert task.started_at is not None, task
            assert isinstance(task.result, float), task
            found["answer"].append((answered - sent) * 1000)
            found["enqueued"].append((task.created_at.timestamp() - sent) * 1000)
            found["claimed"].append((task.started_at.timestamp() - sent) * 1000)
            found["began"].append((task.result - sent) * 1000)
    return found


def summary(found: dict[str, list[float]]) -> dict[str, float]:
    out = {}
    for name, values in found.items():
        values = sorted(values)
        out[f"{name} p50"] = round(statistics.median(values), 1)
        out[f"{name} p99"] = round(values[min(len(values) - 1, round(0.99 * len(values)))], 1)
    return out


# Words of a command line that name the process.
NAMES = {
    b"bench.worker_app:app": "worker",
    b"serve": "gateway",
    b"bench.probes.busy_neighbour": "probe",
}


def schedstat() -> dict[str, tuple[int, int]]:
    """Nanoseconds each process from this one down ran and waited for a CPU so far
    (``/proc/<pid>/schedstat``, summed over its threads), by a short name and its pid."""
    found = {}
    for pid in [os.getpid(), *descendants(os.getpid())]:
        try:
            words = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            ran, waited = 0, 0
            for thread in Path(f"/proc/{pid}/task").iterdir():
                fields = (thread / "schedstat").read_text().split()
                ran, waited = ran + int(fields[0]), waited + int(fields[1])
        except OSError:
            continue  # exited meanwhile
        name = next((NAMES[w] for w in words if w in NAMES), Path(words[0].decode()).name)
        found[f"{name} {pid}"] = (ran, waited)
    return found


def turns(folder: str, start: float, end: float) -> dict[str, float]:
    """The sampled waits for a turn of the gateway's loop between ``start`` and ``end``."""
    found = sorted(
        float(wait) * 1000
        for path in Path(folder).glob("turns.*")
        for at, wait in (line.split() for line in path.read_text().splitlines())
        if start <= float(at) <= end
    )
    if not found:
        return {}
    p90 = found[min(len(found) - 1, int(0.9 * len(found)))]
    return {"n": len(found), "p50": round(statistics.median(found), 2), "p90": round(p90, 2)}


def own_worker(admin: Client) -> subprocess.Popen[bytes]:
    """A second bench worker for the probe queue alone, its endpoint replacing the shared one."""
    port = free_port()
    (old,) = admin.list_endpoints(PROBE)
    endpoint = admin.add_endpoint(PROBE, f"http://127.0.0.1:{port}/", concurrency=128)
    admin.delete_endpoint(PROBE, old.id)
    command = [sys.executable, "-m", "uvicorn", "bench.worker_app:app", "--port", str(port)]
    command += ["--log-level", "warning", "--no-access-log", "--loop", "uvloop"]
    worker = subprocess.Popen(
        [*command, "--http", "httptools"],
        env={**os.environ, "JOBGATE_WORKER_SECRET": str(endpoint.secret)},
        cwd=ROOT,
    )
    wait_http(f"http://127.0.0.1:{port}/", worker)
    return worker


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", choices=("shared", "own"), default="shared")
    parser.add_argument("--drain", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=128)
    parser.add_argument("--probes", type=int, default=200)
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument(
        "--turns", action="store_true", help="also time the gateway's loop turns (a sampler)"
    )
    args = parser.parse_args()
    turns_dir = tempfile.mkdtemp()
    if args.turns:
        Path(turns_dir, "sitecustomize.py").write_text(TURNS)
        path = os.environ.get("PYTHONPATH")
        os.environ["PYTHONPATH"] = turns_dir + (os.pathsep + path if path else "")
        os.environ["JG_TURNS"] = str(Path(turns_dir, "turns"))
    with tempfile.TemporaryDirectory() as tmp, ManagedRedis(Path(tmp)) as server:
        pid = server.process.pid if server.process else 0
        with (
            jobgate(server.url, pid, 1, args.concurrency, extra_queues=(PROBE,)) as (urls, cpu),
            Client(urls[0], KEY) as admin,
        ):
            extra = own_worker(admin) if args.worker == "own" else None
            try:
                admin.patch_queue(PROBE, paused=False)
                asyncio.run(probe(urls[0], 50, args.rate))  # warm up
                idle = summary(asyncio.run(probe(urls[0], args.probes, args.rate)))
                enqueue_batches(urls, args.drain, "bench")
                admin.patch_queue("bench", paused=False)
                sched = schedstat()
                before, start = cpu(), time.monotonic()
                probing = time.time()
                done_before = admin.get_queue("bench").counts[TaskState.SUCCEEDED]
                own_before = tree_cpu_seconds(extra.pid) if extra else 0.0
                busy = summary(asyncio.run(probe(urls[0], args.probes, args.rate)))
                after, elapsed = cpu(), time.monotonic() - start
                probed = time.time()
                ended = schedstat()
                waits = {
                    name: (
                        round((ran - sched[name][0]) / elapsed / 1e7),
                        round((waited - sched[name][1]) / elapsed / 1e7),
                    )
                    for name, (ran, waited) in ended.items()
                    if name in sched
                }
                done = admin.get_queue("bench").counts[TaskState.SUCCEEDED] - done_before
                load = {k: round(100 * (after[k] - before[k]) / elapsed) for k in after}
                if extra:
                    load["own worker"] = round(
                        100 * (tree_cpu_seconds(extra.pid) - own_before) / elapsed
                    )
                load["drain (tasks/s)"] = round(done / elapsed)
            finally:
                if extra:
                    stop([extra])
    print(json.dumps({"worker": args.worker, "idle": idle, "busy": busy, "cpu %": load}))
    if args.turns:
        print(json.dumps({"gateway loop turn while busy (ms)": turns(turns_dir, probing, probed)}))
    shutil.rmtree(turns_dir)
    print(json.dumps({"ran, waited for a CPU (% of the busy run)": waits, "load": os.getloadavg()}))


if __name__ == "__main__":
    main()
