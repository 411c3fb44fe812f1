"""A chaos soak: gateways, workers and Redis killed under load, then every promise checked.

    .venv/bin/python bench/soak.py --duration 600 --rate 220

What runs, all on loopback, each its own process:

- one ``redis-server`` (AOF, ``appendfsync always``), SIGKILLed and restarted on the same port
  and data folder ``--redis-kills`` times;
- ``--gateways`` gateways, SIGKILLed one at a time and restarted on the same port;
- ``--workers`` SDK push workers and one pull worker (bench/soak_worker.py), SIGKILLed, and
  SIGSTOPped for longer than the lease, then continued (the zombie's callbacks must get 409);
- a producer sending single enqueues at ``--rate`` per second to the gateways in turn, each with a
  client-chosen id, retried (another gateway, same id) until the store acknowledged it: 201, or
  409 for an id a lost answer had stored already;
- a job firing every second with overlap ``allow`` into a queue whose retention is 15 s, so its
  runs must keep their end after their tasks are swept.

Afterwards it waits for the queues to drain and checks, from the store's answers and the workers'
own logs: every acknowledged task succeeded, none lost, none run that nobody enqueued, every
result from the task's final attempt, each (task, attempt) run once, each durable step's
function run once (or again only where a kill could explain it), every fire time of the job one
run with its end recorded, no step record left behind by the sweep, and every 5xx answer of the
gateways dated against the Redis outages. It prints a report (also written to ``--out``).

Traffic goes to 127.0.0.1 only; every loop is bounded by ``--duration`` and the drain deadline.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import aiohttp
import redis
from ulid import ULID

from gateway.serving.redis_server import ManagedRedis, free_port

ROOT = Path(__file__).resolve().parents[1]
ADMIN = "soak-admin-key-0123456789abcdef"
QUEUE, RUNS_QUEUE = "soak", "soak-runs"
KINDS = {"inline": 0.45, "fail_once": 0.15, "beat": 0.15, "steps": 0.2, "short_steps": 0.05}
LEASE = 4.0
DONE = {"succeeded", "failed", "dead", "cancelled"}


def now() -> float:
    return time.monotonic()


@dataclass
class Timeline:
    """What happened when: monotonic seconds from the start."""

    start: float = field(default_factory=now)
    faults: list[tuple[float, str]] = field(default_factory=list)
    redis_down: list[tuple[float, float]] = field(default_factory=list)  # killed .. all ready
    ready_after: list[list[float]] = field(default_factory=list)  # per Redis restart, per gateway
    restarting: set[int] = field(default_factory=set)  # pids the fault loop is restarting
    exits: list[str] = field(default_factory=list)  # processes that ended by themselves

    def at(self) -> float:
        return now() - self.start

    def fault(self, what: str) -> None:
        self.faults.append((self.at(), what))
        print(f"[{self.at():7.1f}s] {what}", flush=True)


class Procs:
    """The soak's processes, by role, restartable on the same port."""

    def __init__(self, folder: Path, redis_port: int) -> None:
        self.folder = folder
        self.redis = ManagedRedis(folder / "redis", redis_port, appendfsync="always")
        self.redis_url = self.redis.url
        self.gateway_ports: list[int] = []
        self.gateways: list[subprocess.Popen[bytes]] = []
        self.worker_ports: list[int] = []
        self.workers: list[subprocess.Popen[bytes]] = []
        self.puller: subprocess.Popen[bytes] | None = None
        self.pull_endpoint = ""
        self.secrets: dict[int, list[str]] = defaultdict(list)  # worker port -> its secrets

    def gateway_env(self, port: int) -> dict[str, str]:
        return {
            **os.environ,
            "JOBGATE_REDIS_URL": self.redis_url,
            "JOBGATE_PORT": str(port),
            "JOBGATE_API_KEYS": json.dumps([{"key": ADMIN, "scopes": ["admin"]}]),
            "JOBGATE_ALLOW_PRIVATE_ENDPOINTS": "true",
            "JOBGATE_LOG_LEVEL": "warning",
        }

    def start_gateway(self, i: int) -> None:
        port = self.gateway_ports[i]
        with open(self.folder / f"gateway-{i}.log", "ab") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "gateway", "serve"],
                env=self.gateway_env(port),
                cwd=ROOT,
                stdout=log,
                stderr=log,
            )
        self.gateways[i] = proc

    def start_worker(self, i: int) -> None:
        port = self.worker_ports[i]
        env = {**os.environ, "SOAK_LOG": str(self.folder / f"worker-{i}.jsonl")}
        env["SOAK_SECRETS"] = json.dumps(self.secrets[port])
        with open(self.folder / f"worker-{i}.log", "ab") as log:
            self.workers[i] = subprocess.Popen(
                [sys.executable, "-m", "uvicorn", "bench.soak_worker:worker", "--host",
                 "127.0.0.1", "--port", str(port), "--log-level", "warning"],
                env=env, cwd=ROOT, stdout=log, stderr=log,
            )  # fmt: skip

    def start_puller(self) -> None:
        env = {
            **os.environ,
            "SOAK_LOG": str(self.folder / "puller.jsonl"),
            "JOBGATE_URL": f"http://127.0.0.1:{self.gateway_ports[0]}",
            "JOBGATE_API_KEY": ADMIN,
        }
        with open(self.folder / "puller.log", "ab") as log:
            self.puller = subprocess.Popen(
                [sys.executable, "-m", "gateway", "worker", "--pull", "--queue", QUEUE,
                 "--endpoint", self.pull_endpoint, "--max-tasks", "8", "--wait", "5",
                 "--log-level", "warning", "bench.soak_worker:worker"],
                env=env, cwd=ROOT, stdout=log, stderr=log,
            )  # fmt: skip

    def all(self) -> list[subprocess.Popen[bytes]]:
        found = [*self.gateways, *self.workers, *([self.puller] if self.puller else [])]
        return [p for p in found if p is not None]

    def stop(self) -> None:
        for proc in self.all():
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGCONT)
                proc.terminate()
        for proc in self.all():
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.redis.stop()


async def wait_ready(session: aiohttp.ClientSession, url: str, deadline: float) -> None:
    while now() < deadline:
        with contextlib.suppress(aiohttp.ClientError, TimeoutError):
            async with session.get(f"{url}/readyz") as answer:
                if answer.status == 200:
                    return
        await asyncio.sleep(0.05)
    raise RuntimeError(f"{url} was not ready in time")


@dataclass
class Producer:
    urls: list[str]
    rate: float
    timeline: Timeline
    acked: dict[str, tuple[str, str, float]] = field(default_factory=dict)  # id -> kind, queue, t
    answers: Counter[str] = field(default_factory=Counter)
    errors: list[tuple[float, int, str]] = field(default_factory=list)  # t, status, detail
    turn: int = 0

    def url(self) -> str:
        self.turn += 1
        return self.urls[self.turn % len(self.urls)]

    async def enqueue(self, session: aiohttp.ClientSession, n: int, kind: str) -> None:
        task_id = str(ULID())
        queue = RUNS_QUEUE if kind == "short_steps" else QUEUE
        body = {"id": task_id, "name": kind, "payload": {"args": [n], "kwargs": {}}}
        for _ in range(600):
            url = self.url()
            try:
                async with session.post(f"{url}/v1/queues/{queue}/tasks", json=body) as answer:
                    status = answer.status
                    text = await answer.text()
            except (aiohttp.ClientError, TimeoutError) as e:
                self.answers["connection error"] += 1
                self.errors.append((self.timeline.at(), 0, f"{url}: {type(e).__name__}"))
                await asyncio.sleep(0.2)
                continue
            self.answers[str(status)] += 1
            if status in (200, 201, 409):
                if status == 409 and "exists" not in text and "already" not in text:
                    self.errors.append((self.timeline.at(), status, text[:200]))
                self.acked[task_id] = (kind, queue, self.timeline.at())
                return
            self.errors.append((self.timeline.at(), status, text[:200]))
            await asyncio.sleep(0.2)
        raise RuntimeError(f"task {task_id} was never acknowledged")

    async def run(self, session: aiohttp.ClientSession, seconds: float) -> None:
        kinds, weights = list(KINDS), list(KINDS.values())
        pending: set[asyncio.Task[None]] = set()
        start, n = now(), 0
        while now() - start < seconds:
            due = start + n / self.rate
            if due > now():
                await asyncio.sleep(due - now())
            if len(pending) < 256:
                kind = random.choices(kinds, weights)[0]
                job = asyncio.create_task(self.enqueue(session, n, kind))
                pending.add(job)
                job.add_done_callback(pending.discard)
            n += 1
        if pending:
            await asyncio.gather(*pending)


async def faults(
    procs: Procs, timeline: Timeline, seconds: float, args: argparse.Namespace
) -> None:
    """Kills spread over the run: gateways, workers, SIGSTOPs past the lease, Redis."""
    plan: list[tuple[float, str]] = []
    for kind, count in (
        ("gateway", args.gateway_kills),
        ("worker", args.worker_kills),
        ("stop", args.stops),
        ("redis", args.redis_kills),
    ):
        for i in range(count):
            # spread evenly with jitter, away from the first and last 10 %
            at = seconds * (0.1 + 0.8 * (i + random.random()) / max(count, 1))
            plan.append((at, kind))
    plan.sort()
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session:
        for at, kind in plan:
            await asyncio.sleep(max(0.0, timeline.start + at - now()))
            if kind == "gateway":
                i = random.randrange(len(procs.gateways))
                timeline.restarting.add(procs.gateways[i].pid)
                procs.gateways[i].kill()
                procs.gateways[i].wait()
                timeline.fault(f"SIGKILL gateway {i}")
                await asyncio.sleep(random.uniform(0.5, 2.0))
                procs.start_gateway(i)
            elif kind == "worker":
                i = random.randrange(len(procs.workers) + 1)
                if i == len(procs.workers) and procs.puller is not None:
                    timeline.restarting.add(procs.puller.pid)
                    procs.puller.kill()
                    procs.puller.wait()
                    timeline.fault("SIGKILL pull worker")
                    await asyncio.sleep(1.0)
                    procs.start_puller()
                else:
                    i %= len(procs.workers)
                    timeline.restarting.add(procs.workers[i].pid)
                    procs.workers[i].kill()
                    procs.workers[i].wait()
                    timeline.fault(f"SIGKILL worker {i}")
                    await asyncio.sleep(1.0)
                    procs.start_worker(i)
            elif kind == "stop":
                i = random.randrange(len(procs.workers))
                os.kill(procs.workers[i].pid, signal.SIGSTOP)
                timeline.fault(f"SIGSTOP worker {i} for {LEASE + 3:.0f}s")
                await asyncio.sleep(LEASE + 3)
                os.kill(procs.workers[i].pid, signal.SIGCONT)
            else:
                process = procs.redis.process
                assert process is not None
                process.kill()
                process.wait()
                down = timeline.at()
                timeline.fault("SIGKILL redis")
                await asyncio.sleep(3.0)
                procs.redis.start(timeout=60)
                timeline.fault("redis restarted")
                urls = [f"http://127.0.0.1:{port}" for port in procs.gateway_ports]
                try:
                    took = await all_ready(session, urls, now() + 60)
                except RuntimeError as e:
                    took = [str(e)]  # type: ignore[list-item]
                timeline.redis_down.append((down, timeline.at()))
                timeline.fault(f"every gateway ready; each after (s) {took}")
                timeline.ready_after.append(took)


async def watchdog(procs: Procs, timeline: Timeline, seconds: float) -> None:
    """A process that ended without being killed is a finding: record it, and start it again."""
    while timeline.at() < seconds:
        await asyncio.sleep(1.0)
        for role, found, start in (
            ("gateway", procs.gateways, procs.start_gateway),
            ("worker", procs.workers, procs.start_worker),
        ):
            for i, proc in enumerate(found):
                if proc.poll() is not None and proc.pid not in timeline.restarting:
                    timeline.fault(f"{role} {i} exited by itself with {proc.returncode}")
                    timeline.exits.append(f"{role} {i}: {proc.returncode}")
                    start(i)


async def read_tasks(urls: list[str], ids: list[str]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    headers = {"authorization": f"Bearer {ADMIN}"}
    queue = list(ids)
    async with aiohttp.ClientSession(headers=headers) as session:

        async def reader(k: int) -> None:
            while queue:
                task_id = queue.pop()
                for _ in range(50):
                    try:
                        async with session.get(f"{urls[k % len(urls)]}/v1/tasks/{task_id}") as a:
                            if a.status == 404:
                                found[task_id] = {"state": "missing"}
                                break
                            if a.status == 200:
                                found[task_id] = await a.json()
                                break
                    except aiohttp.ClientError:
                        pass
                    await asyncio.sleep(0.2)

        await asyncio.gather(*(reader(k) for k in range(32)))
    return found


def worker_logs(folder: Path) -> list[dict[str, Any]]:
    lines = []
    for path in sorted(folder.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            with contextlib.suppress(json.JSONDecodeError):  # a kill mid-line
                lines.append(json.loads(line))
    return lines


async def setup(procs: Procs, session: aiohttp.ClientSession, url: str) -> str:
    """Queues, endpoints, the pull endpoint and the job; the job's id."""
    policy = {
        "lease_timeout": LEASE,
        "max_attempts": 25,
        "backoff": {"strategy": "constant", "base_delay": 0.5, "max_delay": 0.5},
        "max_concurrency": 400,
    }
    for queue, retention in ((QUEUE, 7200), (RUNS_QUEUE, 15)):
        body = {**policy, "retention_succeeded": retention}
        async with session.put(f"{url}/v1/queues/{queue}", json=body) as answer:
            assert answer.status in (200, 201), await answer.text()
    for port in procs.worker_ports:
        for queue in (QUEUE, RUNS_QUEUE):
            body = {"url": f"http://127.0.0.1:{port}/", "concurrency": 64, "batch_size": 16}
            async with session.post(f"{url}/v1/queues/{queue}/endpoints", json=body) as answer:
                assert answer.status == 201, await answer.text()
                made = await answer.json()
            procs.secrets[port].append(made["secret"])
    async with session.post(f"{url}/v1/queues/{QUEUE}/endpoints", json={"pull": True}) as answer:
        assert answer.status == 201, await answer.text()
        procs.pull_endpoint = (await answer.json())["id"]
    job = {
        "title": "soak tick",
        "task": {"queue": RUNS_QUEUE, "name": "tick"},
        "args": {"args": [-1], "kwargs": {}},
        "schedule": {"kind": "interval", "seconds": 1},
        "overlap": "allow",
    }
    async with session.post(f"{url}/v1/jobs", json=job) as answer:
        assert answer.status == 201, await answer.text()
        return str((await answer.json())["id"])


async def all_ready(
    session: aiohttp.ClientSession, urls: list[str], deadline: float
) -> list[float]:
    """Wait until every gateway answers /readyz 200; how long each took, in seconds."""
    start = now()

    async def one(url: str) -> float:
        await wait_ready(session, url, deadline)
        return round(now() - start, 2)

    return list(await asyncio.gather(*(one(url) for url in urls)))


async def drain(session: aiohttp.ClientSession, url: str, deadline: float) -> dict[str, Any]:
    """Wait until neither queue holds unfinished work; their counts then."""
    counts: dict[str, Any] = {}
    while now() < deadline:
        busy = 0
        for queue in (QUEUE, RUNS_QUEUE):
            with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                async with session.get(f"{url}/v1/queues/{queue}") as answer:
                    counts[queue] = (await answer.json())["counts"]
            busy += sum(n for state, n in counts.get(queue, {"?": 1}).items() if state not in DONE)
        if busy == 0:
            return counts
        await asyncio.sleep(1.0)
    return counts


async def read_runs(session: aiohttp.ClientSession, url: str, job: str) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        query = f"?limit=500{'&cursor=' + cursor if cursor else ''}"
        async with session.get(f"{url}/v1/jobs/{job}/runs{query}") as answer:
            page = await answer.json()
        runs.extend(page["items"])
        cursor = page.get("next_cursor")
        if not cursor:
            return runs


def parse(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def check_tasks(
    acked: dict[str, tuple[str, str, float]],
    tasks: dict[str, dict[str, Any]],
    logs: list[dict[str, Any]],
    report: dict[str, Any],
) -> None:
    runs = [line for line in logs if line.get("e") == "run"]
    per_attempt = Counter((line["id"], line["a"]) for line in runs)
    kept = {i for i, (_, queue, _) in acked.items() if queue == QUEUE}
    states = Counter(tasks[i]["state"] for i in kept)
    not_final = [
        i
        for i in kept
        if tasks[i]["state"] == "succeeded"
        and (tasks[i].get("result") or {}).get("attempt") != tasks[i]["attempt"]
    ]
    ticks = {line["id"] for line in runs if line.get("k") == "tick"}
    steps = Counter((line["id"], line["s"]) for line in logs if line.get("e") == "step")
    # A step function run again after the gateway said it was recorded: by the recording
    # attempt or a later one (a step the push failed to carry: a broken promise), or by an
    # earlier attempt resumed past its lease (a SIGSTOPped zombie, whose callbacks get 409).
    attempt_of: dict[tuple[str, int], int] = {}  # (task id, pid) -> the attempt that pid runs
    recorded: dict[tuple[str, str], tuple[float, int]] = {}  # -> first recorded: time, attempt
    after_record: list[tuple[str, str]] = []
    by_zombies = 0
    for line in sorted(logs, key=lambda line: line["t"]):
        if line.get("e") == "run":
            attempt_of[(line["id"], line["p"])] = line["a"]
            continue
        key = (line["id"], line.get("s", ""))
        attempt = attempt_of.get((line["id"], line["p"]), 0)
        if line.get("e") == "recorded":
            recorded.setdefault(key, (line["t"], attempt))
        elif line.get("e") == "step" and key in recorded and line["t"] > recorded[key][0]:
            if attempt < recorded[key][1]:
                by_zombies += 1
            else:
                after_record.append(key)
    planned = {"fail_once": 2}
    extra_attempts = Counter(
        acked[i][0]
        for i in kept
        if tasks[i]["state"] == "succeeded" and tasks[i]["attempt"] > planned.get(acked[i][0], 1)
    )
    recorded_missing = [
        i
        for i in kept
        if acked[i][0] == "steps"
        and tasks[i]["state"] == "succeeded"
        and sorted(s["name"] for s in tasks[i].get("steps", [])) != ["one", "three", "two"]
    ]
    report["tasks"] = {
        "acknowledged": len(acked),
        "acknowledged by kind": dict(Counter(kind for kind, _, _ in acked.values())),
        "read back (long retention queue)": len(kept),
        "states": dict(states),
        "lost (404)": states.get("missing", 0),
        "result not from the final attempt": not_final[:20],
        "runs of ids nobody enqueued": sorted({i for i, _ in per_attempt} - set(acked) - ticks)[
            :20
        ],
        "(task, attempt) run more than once": [k for k, n in per_attempt.items() if n > 1][:20],
        "tasks that took more attempts than planned, by kind (kills, outages)": dict(
            extra_attempts
        ),
        "durable steps whose function ran more than once": len(
            [k for k, n in steps.items() if n > 1]
        ),
        "durable step runs": sum(steps.values()),
        "durable steps run again after the gateway said recorded": after_record[:20],
        "... of which run by an older attempt resumed past its lease (a zombie)": by_zombies,
        "succeeded durable tasks missing a recorded step": recorded_missing[:20],
    }


def check_runs(
    runs: list[dict[str, Any]], first: float, last: float, timeline: Timeline, wall0: float
) -> dict[str, Any]:
    """Every fire time of the 1 s job between ``first`` and ``last`` (epoch seconds) one run."""
    fire = Counter(round(parse(run["fire_time"])) for run in runs if run.get("fire_time"))
    expected = range(round(first), round(last))
    missing = [t for t in expected if t not in fire]
    statuses = Counter(run["status"] for run in runs)
    no_end = [
        run["id"]
        for run in runs
        if run["status"] == "success" and (run["started_at"] is None or run["ended_at"] is None)
    ]
    bad = [
        (run["id"], run["status"], run.get("message")) for run in runs if run["status"] != "success"
    ]
    return {
        "runs": len(runs),
        "fire times expected": len(expected),
        "fire times without a run": [round(t - wall0, 1) for t in missing][:40],
        "fire times with two runs or more": sum(1 for n in fire.values() if n > 1),
        "statuses": dict(statuses),
        "not success (id, status, message)": bad[:20],
        "success without started_at/ended_at": no_end[:20],
    }


def classify_errors(errors: list[tuple[float, int, str]], timeline: Timeline) -> dict[str, Any]:
    def in_outage(t: float) -> bool:
        return any(down <= t <= up for down, up in timeline.redis_down)

    fives = [(t, s, d) for t, s, d in errors if s >= 500]
    outside = [(round(t, 1), s, d) for t, s, d in fives if not in_outage(t)]
    return {
        "5xx during Redis outages (kill to every gateway ready)": len(fives) - len(outside),
        "5xx outside them": len(outside),
        "5xx outside them (first 20)": outside[:20],
        "4xx other than 409": [(round(t, 1), s, d) for t, s, d in errors if 400 <= s < 500][:20],
        "connection errors": sum(1 for _, s, _ in errors if s == 0),
    }


def leaked_steps(redis_url: str) -> dict[str, Any]:
    from gateway.store.keys import QueueKeys

    found: dict[str, Any] = {}
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    with client:
        for queue in (QUEUE, RUNS_QUEUE):
            keys = QueueKeys.of(queue)
            ids = client.hkeys(keys.steps)
            orphans = [i for i in ids if not client.hexists(keys.meta, i)]
            found[queue] = {"step records": len(ids), "without a task": len(orphans)}
    return found


async def soak(args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    timeline = Timeline()
    procs = Procs(folder, free_port())
    procs.redis.start()
    procs.gateway_ports = [free_port() for _ in range(args.gateways)]
    procs.gateways = [None] * args.gateways  # type: ignore[list-item]
    procs.worker_ports = [free_port() for _ in range(args.workers)]
    procs.workers = [None] * args.workers  # type: ignore[list-item]
    urls = [f"http://127.0.0.1:{port}" for port in procs.gateway_ports]
    report: dict[str, Any] = {"folder": str(folder), "settings": vars(args)}
    headers = {"authorization": f"Bearer {ADMIN}"}
    timeout = aiohttp.ClientTimeout(total=30)
    try:
        for i in range(args.gateways):
            procs.start_gateway(i)
        async with aiohttp.ClientSession(headers=headers, timeout=timeout) as session:
            await all_ready(session, urls, now() + 120)
            job = await setup(procs, session, urls[0])
            for i in range(args.workers):
                procs.start_worker(i)
            procs.start_puller()
            await asyncio.sleep(2.0)  # the workers import the SDK
            wall0 = time.time()
            timeline.start = now()
            producer = Producer(urls, args.rate, timeline)
            rss0 = {i: rss(p.pid) for i, p in enumerate(procs.gateways)}
            await asyncio.gather(
                producer.run(session, args.duration),
                faults(procs, timeline, args.duration, args),
                watchdog(procs, timeline, args.duration),
            )
            wall_end = time.time()
            print(f"[{timeline.at():7.1f}s] production ended; draining", flush=True)
            await all_ready(session, urls, now() + 120)
            report["queue counts after the drain"] = await drain(session, urls[0], now() + 300)
            report["gateway RSS kB, start -> end (restarted ones start fresh)"] = {
                i: (rss0[i], rss(p.pid)) for i, p in enumerate(procs.gateways)
            }
            # the job's runs of the production window, and the sweeps past the 15 s retention
            await asyncio.sleep(20)
            runs = await read_runs(session, urls[0], job)
            first = min(parse(r["fire_time"]) for r in runs if r.get("fire_time"))
            report["job runs"] = check_runs(runs, max(first, wall0), wall_end - 2, timeline, wall0)
        tasks = await read_tasks(urls, [i for i, v in producer.acked.items() if v[1] == QUEUE])
        check_tasks(producer.acked, tasks, worker_logs(folder), report)
        report["answers to the producer"] = dict(producer.answers)
        report["errors"] = classify_errors(producer.errors, timeline)
        report["faults"] = dict(
            Counter(what.split(" for")[0].rstrip("0123456789 ") for _, what in timeline.faults)
        )
        report["redis outages (s from start)"] = [
            (round(a, 1), round(b, 1)) for a, b in timeline.redis_down
        ]
        report["leaked step records"] = leaked_steps(procs.redis_url)
        report["processes that exited by themselves"] = timeline.exits
        report["gateways ready after each Redis restart (s)"] = timeline.ready_after
        report["gateway logs"] = scan_logs(folder)
    finally:
        procs.stop()
    return report


def scan_logs(folder: Path) -> dict[str, Any]:
    """Error lines of the gateways' logs, and the last line of each traceback, counted."""
    levels: Counter[str] = Counter()
    ends: Counter[str] = Counter()
    for path in folder.glob("gateway-*.log"):
        lines = path.read_text(errors="replace").splitlines()
        for k, line in enumerate(lines):
            for level in ("ERROR", "CRITICAL"):
                if f" {level} " in line:
                    levels[line.split(f" {level} ", 1)[1][:120]] += 1
            if line.startswith("Traceback"):
                end = next((x for x in lines[k + 1 :] if x and not x[0].isspace()), "")
                ends[end[:160]] += 1
    return {
        "error lines": dict(levels.most_common(15)),
        "tracebacks end": dict(ends.most_common(15)),
    }


def rss(pid: int) -> int:
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=600.0, help="seconds of load")
    parser.add_argument("--rate", type=float, default=220.0, help="enqueues per second")
    parser.add_argument("--gateways", type=int, default=3)
    parser.add_argument(
        "--workers", type=int, default=3, help="push workers (one pull worker more)"
    )
    parser.add_argument("--gateway-kills", type=int, default=19)
    parser.add_argument("--worker-kills", type=int, default=13)
    parser.add_argument("--stops", type=int, default=9, help="SIGSTOPs past the lease")
    parser.add_argument("--redis-kills", type=int, default=2)
    parser.add_argument("--out", type=Path, help="write the report (JSON) here too")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="jobgate-soak-"))
    report = asyncio.run(soak(args, folder))
    text = json.dumps(report, indent=2, default=str)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
