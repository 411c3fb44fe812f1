"""Race (b) for Jobgate alone at 1 and 2 gateway processes, alternated, with what each claim
and finish carried (issue 32 item 3).

Starts a managed Redis and the user's service (``bench/service_app.py``, one uvicorn process,
as ``bench/peers.py`` does); then, for each round and each gateway count in turn (and each
``--tree``, alternated), N fresh ``jobgate serve`` processes on that Redis, a queue whose one
endpoint is the service (concurrency 128, one task per push, as the race), a warm-up drain,
then ``--tasks`` enqueued while paused and drained. Each gateway loads
``bench/probes/twoproc_hook.py``, which counts its loop claims, carried claims and finishes.

Prints one JSON line per drain: gateways, tree, tasks/s, CPU per task (µs) of Redis, the
gateways and the service, Redis's script calls per task, per gateway the claims (tasks per
claim, claims that leased nothing) and finishes (ends per finish), and the load average; then
the medians per (tree, gateways) and, against the one-gateway drain of the same round, the
rate's and the total CPU per task's ratios (medians).

``--neighbour`` adds, at one gateway, the drain beside a process busy half the time: what one
more process sharing the cores costs the drain's processes per task.

``--half`` adds, at one gateway, the drain with half the window (the endpoint's concurrency 64,
what each of two gateways holds): whether a gateway's smaller window or the second process
costs.

``--owner`` adds, at N > 1, the drain where the first gateway alone dispatches the queue (the
others serve the API and stand by): what the drain costs when the endpoint's window is not split.

``--split`` adds, at N > 1, the drain of a perfect split: N queues, one per gateway, each with
its own endpoint on the service (concurrency 128 / N), each gateway dispatching its own queue
alone (the hook's ``$TWOPROC_ONLY``; its finishes carry the next claim, as a queue's only
dispatcher's do), so nothing is shared between gateways but Redis and the service.

Run: ``.venv/bin/python -m bench.probes.twoproc [--rounds 3] [--tasks 10000] [--split]
[--tree DIR ...]`` (several ``--tree``: each tree's gateways in turn, alternated).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import redis

from bench import e2e
from bench.e2e import KEY, ROOT, enqueue_batches
from bench.peers import service
from bench.proc_stat import cpu_seconds
from gateway.serving.redis_server import ManagedRedis
from gateway.store.keys import CHANGED_CHANNEL, QueueKeys
from sdk import Client

QUEUE = "http"
HOOK = Path(__file__).with_name("twoproc_hook.py")


@contextmanager
def gateways(
    redis_url: str, count: int, tree: Path, counts: Path, variant: str
) -> Iterator[list[Any]]:
    """``count`` gateways of ``tree`` with the hook loaded; ``split``: gateway i dispatches
    queue ``http<i>`` alone; ``owner``: gateway 0 dispatches the queue alone."""

    def own_env(index: int) -> dict[str, str]:
        if variant == "split":
            return {"TWOPROC_ONLY": f"{QUEUE}{index}"}
        if variant == "owner":
            return {"TWOPROC_ONLY": QUEUE if index == 0 else "-"}
        return {}

    hooks = counts / "hook"
    hooks.mkdir(exist_ok=True)
    shutil.copy(HOOK, hooks / "twoproc_hook.py")
    paths = {"PYTHONPATH": f"{tree}{os.pathsep}{hooks}", "TWOPROC_COUNTS": str(counts)}
    code = "import sys, twoproc_hook; from gateway.cli import main; sys.exit(main(['serve']))"
    with e2e.gateways(
        redis_url,
        count,
        paths,
        command=(sys.executable, "-c", code),
        cwd=tree,
        own_env=own_env,
    ) as procs:
        yield procs


def counted(procs: list[Any], counts: Path) -> list[dict[str, int]]:
    found = []
    for _, proc in procs:
        path = counts / f"{proc.pid}.json"
        path.unlink(missing_ok=True)
        proc.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + 10
        while not path.exists():
            if time.monotonic() > deadline:
                raise SystemExit(f"gateway {proc.pid} wrote no counts")
            time.sleep(0.01)
        found.append(json.loads(path.read_text()))
    return found


NEIGHBOUR = """
import time
while True:
    end = time.perf_counter() + 0.001
    while time.perf_counter() < end:
        pass
    time.sleep(0.001)
"""


@contextmanager
def neighbour() -> Iterator[None]:
    """A process busy half the time (1 ms on, 1 ms asleep), as a second gateway of the drain
    roughly is: what one more process sharing the two cores costs the others per task."""
    proc = subprocess.Popen([sys.executable, "-c", NEIGHBOUR])
    try:
        yield
    finally:
        proc.kill()
        proc.wait()


def switches(pid: int) -> int:
    """Context switches of the process so far (voluntary: it waited; others: preempted)."""
    found = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if "ctxt_switches" in line:
            found += int(line.split()[1])
    return found


def drain(
    redis_url: str,
    redis_pid: int,
    svc: Any,
    count: int,
    tree: Path,
    tasks: int,
    variant: str,
) -> dict:
    """One drain of a ``variant`` (see the module's docstring; '' the race's own)."""
    split = variant == "split"
    window = 64 if variant == "half" else 128
    with redis.Redis.from_url(redis_url) as r:
        r.flushall()  # the previous drain's keys
    with (
        tempfile.TemporaryDirectory() as tmp,
        gateways(redis_url, count, tree, Path(tmp), variant) as procs,
        Client(procs[0][0], KEY, timeout=60) as admin,
        redis.Redis.from_url(redis_url) as r,
    ):
        urls = [url for url, _ in procs]
        queues = [f"{QUEUE}{i}" for i in range(count)] if split else [QUEUE]
        secret = None
        for queue in queues:
            admin.put_queue(queue, max_concurrency=1000, paused=True)
            endpoint = admin.add_endpoint(
                queue, svc.url + "/jobgate", concurrency=window // len(queues), batch_size=1
            )
            if secret is None:
                secret = endpoint.secret
            else:  # the service checks one secret: every endpoint signs with the first's
                key = QueueKeys.of(queue).endpoints
                record = json.loads(r.hget(key, endpoint.id))
                record["secrets"] = [secret]
                r.hset(key, endpoint.id, json.dumps(record))
                r.publish(CHANGED_CHANNEL, queue)  # the gateways read the endpoint again
        httpx.put(svc.url + "/secret", content=secret).raise_for_status()
        done = [QueueKeys.of(queue).succeeded for queue in queues]

        def released(target: int) -> float:
            start = time.perf_counter()
            for queue in queues:
                admin.patch_queue(queue, paused=False)
            deadline = time.monotonic() + 300
            while sum(int(r.zcard(key)) for key in done) < target:
                if time.monotonic() > deadline:
                    raise SystemExit("drain did not finish in 300 s")
                time.sleep(0.005)
            elapsed = time.perf_counter() - start
            for queue in queues:
                admin.patch_queue(queue, paused=True)
            return elapsed

        def fill(total: int) -> None:
            for queue in queues:
                enqueue_batches(urls, total // len(queues), queue)

        warmup = 500
        fill(warmup)
        released(warmup)
        fill(tasks)
        pids = {"redis": [redis_pid], "gateway": [p.pid for _, p in procs], "service": [svc.pid]}
        cpu0 = {role: sum(cpu_seconds(p) for p in ps) for role, ps in pids.items()}
        sw0 = {role: sum(switches(p) for p in ps) for role, ps in pids.items()}
        counts0 = counted(procs, Path(tmp))
        evals0 = r.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0)
        load = os.getloadavg()[0]
        elapsed = released(warmup + tasks)
        evals1 = r.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0)
        counts1 = counted(procs, Path(tmp))
        cpu1 = {role: sum(cpu_seconds(p) for p in ps) for role, ps in pids.items()}
        sw1 = {role: sum(switches(p) for p in ps) for role, ps in pids.items()}
    per = []
    for before, after in zip(counts0, counts1, strict=True):
        d = {k: after[k] - before[k] for k in after}
        per.append(
            {
                "claims": d["claims"],
                "per_claim": round(d["claimed"] / max(1, d["claims"] - d["claims_empty"]), 1),
                "empty": d["claims_empty"],
                "carried": d["carried"],
                "per_carried": round(d["carried_tasks"] / max(1, d["carried"]), 1),
                "finishes": d["finishes"],
                "per_finish": round(d["ends"] / max(1, d["finishes"]), 1),
                "tasks": d["claimed"] + d["carried_tasks"],
            }
        )
    return {
        "gateways": count,
        "tree": str(tree),
        "rate": round(tasks / elapsed),
        "cpu_us": {k: round((cpu1[k] - cpu0[k]) / tasks * 1e6) for k in cpu1},
        "switches_per_task": {k: round((sw1[k] - sw0[k]) / tasks, 3) for k in sw1},
        "scripts_per_task": round((evals1 - evals0) / tasks, 3),
        "per_gateway": per,
        "load": round(load, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--gateways", default="1,2")
    parser.add_argument("--tree", action="append", type=Path, default=[])
    parser.add_argument(
        "--split", action="store_true", help="also drain with one queue per gateway, alone"
    )
    parser.add_argument(
        "--owner",
        action="store_true",
        help="also drain with only the first gateway dispatching (the others serve)",
    )
    parser.add_argument(
        "--half",
        action="store_true",
        help="also drain with one gateway and half the window (concurrency 64)",
    )
    parser.add_argument(
        "--neighbour",
        action="store_true",
        help="also drain with one gateway beside a process busy half the time",
    )
    args = parser.parse_args()
    trees = args.tree or [ROOT]
    counts = [int(n) for n in args.gateways.split(",")]
    runs: list[dict] = []
    with (
        tempfile.TemporaryDirectory() as tmp,
        ManagedRedis(Path(tmp) / "redis") as server,
        service(Path(tmp)) as svc,
    ):
        redis_pid = server.process.pid if server.process else 0
        for number in range(args.rounds):
            order = counts if number % 2 == 0 else counts[::-1]
            for count in order:
                for tree in trees if number % 2 == 0 else trees[::-1]:
                    variants = [""]
                    variants += ["split"] if args.split and count > 1 else []
                    variants += ["owner"] if args.owner and count > 1 else []
                    variants += ["neighbour"] if args.neighbour and count == 1 else []
                    variants += ["half"] if args.half and count == 1 else []
                    for variant in variants:
                        with neighbour() if variant == "neighbour" else contextlib.nullcontext():
                            found = drain(
                                server.url,
                                redis_pid,
                                svc,
                                count,
                                tree,
                                args.tasks,
                                variant,
                            )
                        found["variant"] = variant
                        found["round"] = number
                        runs.append(found)
                        print(json.dumps(found), flush=True)
    summary(runs)


def summary(runs: list[dict]) -> None:
    """Medians per (tree, gateways, variant), and each one's rate and total CPU per task ÷ the
    same tree's one-gateway drain of the same round (median of the rounds' ratios)."""
    groups: dict[tuple[str, int, str], list[dict]] = {}
    for run in runs:
        groups.setdefault((run["tree"], run["gateways"], run["variant"]), []).append(run)
    for (tree, count, variant), mine in groups.items():
        base = {r["round"]: r for r in groups.get((tree, 1, ""), [])}
        cpu = {k: statistics.median(r["cpu_us"][k] for r in mine) for k in mine[0]["cpu_us"]}
        line = (
            f"{tree} {count} gateway(s) {variant}: "
            f"rate {statistics.median(r['rate'] for r in mine):,.0f} "
            f"({[r['rate'] for r in mine]}); CPU per task µs {cpu}, "
            f"total {statistics.median(sum(r['cpu_us'].values()) for r in mine)}; "
            f"scripts per task {statistics.median(r['scripts_per_task'] for r in mine)}"
        )
        if (count > 1 or variant) and base:
            rates = [r["rate"] / base[r["round"]]["rate"] for r in mine]
            cpus = [
                sum(r["cpu_us"].values()) / sum(base[r["round"]]["cpu_us"].values()) for r in mine
            ]
            line += (
                f"; ÷ 1 gateway: rate {statistics.median(rates):.2f}, "
                f"CPU per task {statistics.median(cpus):.2f}"
            )
        print(line)


if __name__ == "__main__":
    main()
