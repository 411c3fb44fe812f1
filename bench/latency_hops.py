"""Enqueue to start, hop by hop: where a lone task's milliseconds go, per process.

Copies each source tree given (the worktree, or one exported with ``git archive <commit> |
tar -x -C DIR``) to a temporary directory, adds timestamps to the copy (``time.time_ns()`` at
each hop, in the process that makes it, buffered in memory and written to a file per process
every 50 hops and at exit), and runs there what ``bench/latency.py`` runs idle: a managed
Redis, one gateway, the bench SDK worker, 100 stamp tasks to warm up, then ``--samples`` stamp
tasks at ``--rate`` per second from one SDK ``AsyncClient`` (with ``--busy N``, while another
queue, ``busy``, one push each on the same worker, drains N no-op tasks). The trees take turns,
``--rounds`` times. For each run it prints the median and p90 (ms) of each step, paired per
task by its id:

- producer: ``enqueue`` called → aiohttp called → the request written (``StreamWriter``);
- gateway: request bytes read (uvicorn's ``data_received``) → ``DirectRoute`` → the handler →
  the task service → the task built → the store's coalescer called → its task running → the
  round trip written → its replies read → the enqueue stored → the claim handed to
  ``Dispatcher.take`` → the enqueue's call returned → its answer written → the push task
  running → the push body built → aiohttp called → the push written;
- worker: request bytes read → the app called → body read → ``Runner.run`` → the attempt
  started → the task function running (its ``time.time()``, as the benchmark reads it).

The shares are what to compare between trees: on a loaded machine every step that is CPU grows
with the load, while a wait (a timer, a turn of the loop behind other work, a lingering batch)
stays where it is. The timestamps are added by exact-text patches (``PATCHES``): a tree whose
code moved fails with the anchor it could not find. Nothing here is installed in the trees
themselves.

Run: ``PYTHONPATH=$PWD .venv/bin/python bench/latency_hops.py . /tmp/before --rounds 2``.
"""

from __future__ import annotations

import argparse
import glob
import itertools
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HOPS_MODULE = '''
"""Per-hop timestamps for bench/latency_hops.py (a temporary copy of the tree only)."""
import atexit, contextvars, os, time
_dir = os.environ.get("JG_HOPS")
_buf = []
KEY = contextvars.ContextVar("jg_hops_key", default=None)
STAMPS = contextvars.ContextVar("jg_hops_stamps", default=None)
LAST_DATA = [0]
def hop(tag, key, t=None):
    if _dir is None or key is None:
        return
    _buf.append(f"{tag} {key} {t or time.time_ns()}\\n")
    if len(_buf) >= 50:
        flush()
def early(tag):
    """A stamp taken before the task's id is known: kept in this context until it is."""
    if STAMPS.get() is None:
        STAMPS.set({})
    STAMPS.get()[tag] = time.time_ns()
def known(key):
    for tag, t in (STAMPS.get() or {}).items():
        hop(tag, key, t)
    hop("g_data", key, LAST_DATA[0])
def flush():
    if _dir and _buf:
        with open(os.path.join(_dir, f"hops.{os.getpid()}"), "a") as f:
            f.writelines(_buf)
        _buf.clear()
atexit.register(flush)
if _dir is not None:
    from aiohttp import http_writer as _hw
    _w, _wl = _hw.StreamWriter._write, _hw.StreamWriter._writelines
    def _write(self, chunk):
        hop("x_write", KEY.get()); return _w(self, chunk)
    def _writelines(self, chunks):
        hop("x_write", KEY.get()); return _wl(self, chunks)
    _hw.StreamWriter._write, _hw.StreamWriter._writelines = _write, _writelines
    from uvicorn.protocols.http import httptools_impl as _hi
    _dr = _hi.HttpToolsProtocol.data_received
    def _data(self, data):
        LAST_DATA[0] = time.time_ns(); return _dr(self, data)
    _hi.HttpToolsProtocol.data_received = _data
'''

HOP = "import jg_hops; "  # the prefix of every injected line
PATCHES: list[tuple[str, str, str]] = [
    # (file, anchor, the anchor with timestamps): the anchor must occur exactly once.
    (
        "gateway/api/direct.py",
        "            if match is Match.FULL:\n",
        "            if match is Match.FULL:\n                " + HOP + "jg_hops.early('g_recv')\n",
    ),
    (
        "gateway/api/direct.py",
        "        await response(scope, receive, send)\n",
        "        await response(scope, receive, send)\n        "
        + HOP
        + "jg_hops.hop('g_answered', jg_hops.KEY.get())\n",
    ),
    (
        "gateway/api/tasks.py",
        "async def enqueue(call: Call) -> BaseModel | Reply | Response:\n",
        "async def enqueue(call: Call) -> BaseModel | Reply | Response:\n    "
        + HOP
        + "jg_hops.early('g_handler')\n",
    ),
    (
        "gateway/services/enqueue/__init__.py",
        "        given = given_ids(specs)\n",
        "        " + HOP + "jg_hops.early('g_svc')\n        given = given_ids(specs)\n",
    ),
    (
        "gateway/services/enqueue/__init__.py",
        "            order = self._claim_for(queue) if ready_now else None\n"
        "            enqueued = await self._tasks.enqueue_batch(\n"
        "                queue, new, now, client_ids=bool(given), claim=order\n"
        "            )\n        else:",
        "            " + HOP + "_one = new[0].id if len(new) == 1 else None\n"
        "            if _one: jg_hops.KEY.set(_one); jg_hops.known(_one)\n"
        "            jg_hops.hop('g_built', _one)\n"
        "            order = self._claim_for(queue) if ready_now else None\n"
        "            enqueued = await self._tasks.enqueue_batch(\n"
        "                queue, new, now, client_ids=bool(given), claim=order\n"
        "            )\n"
        "            jg_hops.hop('g_enq_done', _one)\n        else:",
    ),
    (
        "gateway/store/coalescing.py",
        "        loop = asyncio.get_running_loop()\n        if not self._waiting:\n",
        "        " + HOP + "jg_hops.hop('r_run', jg_hops.KEY.get())\n"
        "        loop = asyncio.get_running_loop()\n        if not self._waiting:\n",
    ),
    (
        "gateway/store/coalescing.py",
        "    async def _send(self, batch: Batch) -> None:\n        try:\n",
        "    async def _send(self, batch: Batch) -> None:\n        "
        + HOP
        + "jg_hops.hop('r_task', jg_hops.KEY.get())\n        try:\n",
    ),
    (
        "gateway/store/coalescing.py",
        "        await connection.send_packed_command(pack(words))\n",
        "        " + HOP + "jg_hops.hop('r_sent', jg_hops.KEY.get())\n"
        "        await connection.send_packed_command(pack(words))\n",
    ),
    (
        "gateway/store/coalescing.py",
        "        else:\n            for (_, future), each in zip(batch, replies, strict=True):\n",
        "        else:\n            " + HOP + "jg_hops.hop('r_read', jg_hops.KEY.get())\n"
        "            for (_, future), each in zip(batch, replies, strict=True):\n",
    ),
    (
        "gateway/store/tasks/enqueue.py",
        "        await order.hand_over(self._scripts, self._redis, claimed)\n"
        "        if isinstance(reply, NoScriptError):",
        "        " + HOP + "jg_hops.hop('g_stored', jg_hops.KEY.get())\n"
        "        await order.hand_over(self._scripts, self._redis, claimed)\n"
        "        if isinstance(reply, NoScriptError):",
    ),
    (
        "gateway/dispatch/dispatcher.py",
        "        self._carried.discard(queue)\n        if claim is not None:\n",
        "        self._carried.discard(queue)\n        if claim is not None:\n            "
        + HOP
        + "[jg_hops.hop('g_claimed', lease.task_id) for lease in claim.leases]\n",
    ),
    (
        "gateway/dispatch/delivery.py",
        "        push = self._pusher.push(lease, endpoint, view.policy.push_timeout)\n",
        "        " + HOP + "jg_hops.hop('g_push_task', lease.task_id)\n"
        "        push = self._pusher.push(lease, endpoint, view.policy.push_timeout)\n",
    ),
    (
        "gateway/dispatch/pusher.py",
        "        body = push_body(lease).encode()\n        headers = self.headers(lease, body)\n",
        "        " + HOP + "jg_hops.KEY.set(lease.task_id)\n"
        "        body = push_body(lease).encode()\n        headers = self.headers(lease, body)\n"
        "        jg_hops.hop('g_push_built', lease.task_id)\n",
    ),
    (
        "gateway/dispatch/pusher.py",
        "        _reused.set(False)\n        answered = False\n",
        "        _reused.set(False)\n        answered = False\n        "
        + HOP
        + "jg_hops.hop('g_post', jg_hops.KEY.get())\n",
    ),
    (
        "sdk/worker.py",
        '        kind = scope["type"]\n        if kind == "http":\n',
        '        kind = scope["type"]\n        if kind == "http":\n            '
        + HOP
        + "_id = dict(scope['headers']).get(b'webhook-id', b'').decode() or None\n"
        "            jg_hops.hop('w_data', _id, jg_hops.LAST_DATA[0]); jg_hops.hop('w_app', _id)\n",
    ),
    (
        "sdk/worker.py",
        "                    response = await self._answer(body, _headers(scope))\n",
        "                    jg_hops.hop('w_body', _id)\n"
        "                    response = await self._answer(body, _headers(scope))\n",
    ),
    # Imported at start-up, so its patches of aiohttp and uvicorn hold from the first request.
    (
        "sdk/worker.py",
        "from __future__ import annotations\n",
        "from __future__ import annotations\nimport jg_hops  # noqa\n",
    ),
    (
        "gateway/dispatch/pusher.py",
        "from __future__ import annotations\n",
        "from __future__ import annotations\nimport jg_hops  # noqa\n",
    ),
    (
        "sdk/runner.py",
        "        attempt.start(args, kwargs)\n",
        "        "
        + HOP
        + "jg_hops.hop('w_starting', push.id)\n        attempt.start(args, kwargs)\n",
    ),
    (
        "sdk/sessions.py",
        "        session = self._session or self._open()\n        try:\n",
        "        session = self._session or self._open()\n        "
        + HOP
        + "jg_hops.hop('p_aiohttp', jg_hops.KEY.get())\n        try:\n",
    ),
]

ORDER = [
    "p_send", "p_aiohttp", "p_written", "g_data", "g_recv", "g_handler", "g_svc", "g_built",
    "r_run", "r_task", "r_sent", "r_read", "g_stored", "g_claimed", "g_enq_done", "g_answered",
    "g_push_task", "g_push_built", "g_post", "x_write", "w_data", "w_app", "w_body", "w_starting",
    "w_start",
]  # fmt: skip
GROUPS = {
    "producer: enqueue called -> request written": [("p_send", "p_written")],
    "wire: producer write -> gateway reads it": [("p_written", "g_data")],
    "gateway: request read -> Redis round trip written": [("g_data", "r_sent")],
    "Redis round trip (enqueue + its claim)": [("r_sent", "r_read")],
    "gateway: replies read -> answer written": [("r_read", "g_answered")],
    "gateway: replies read -> push written": [("r_read", "x_write")],
    "wire: push written -> worker reads it": [("x_write", "w_data")],
    "worker: request read -> task function starts": [("w_data", "w_start")],
    "gateway in all (without Redis)": [("g_data", "r_sent"), ("r_read", "x_write")],
    "enqueue called -> task function starts": [("p_send", "w_start")],
    "enqueue called -> its answer read": [("p_send", "p_answer")],
    "gateway: answer written -> the producer's call returns": [("g_answered", "p_answer")],
}

DRIVER = """
import asyncio, os, sys, tempfile, time
from pathlib import Path
import jg_hops
from bench.e2e import KEY, STAMP, enqueue_batches, jobgate
from gateway.serving.redis_server import ManagedRedis
from bench.peers_session import paced
from sdk import AsyncClient, Client
out, samples, rate = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
async def stamps(url, n, record):
    rows = {}
    async with AsyncClient(url, KEY, timeout=60) as client:
        async def send(i):
            jg_hops.KEY.set(f"p{i}" if record else None)
            t0 = time.time_ns()
            task = await client.enqueue("bench", STAMP)
            rows[i] = (t0, task.id, time.time_ns())
        await paced(n, rate, send)
        gate = asyncio.Semaphore(16)
        started = {}
        async def read(i):
            async with gate:
                started[i] = (await client.wait(rows[i][1], timeout=60)).result
        await asyncio.gather(*(read(i) for i in rows))
    if record:
        with open(os.path.join(out, "producer"), "w") as f:
            for i, (t0, tid, t1) in sorted(rows.items()):
                f.write(f"{i} {tid} {t0} {t1} {int(started[i] * 1e9)}\\n")
busy = int(sys.argv[4])
with tempfile.TemporaryDirectory() as tmp, ManagedRedis(Path(tmp)) as server:
    pid = server.process.pid if server.process else 0
    started = jobgate(server.url, pid, 1, 128, extra_queues=("busy",))
    with started as (urls, cpu), Client(urls[0], KEY) as admin:
        admin.patch_queue("bench", paused=False)
        asyncio.run(stamps(urls[0], 100, False))
        if busy:
            enqueue_batches(urls, busy, "busy")
            admin.patch_queue("busy", paused=False)
        asyncio.run(stamps(urls[0], samples, True))
jg_hops.flush()
"""


def instrument(tree: Path, into: Path) -> None:
    shutil.copytree(tree, into, ignore=shutil.ignore_patterns(".git", ".venv", "__pycache__"))
    (into / "jg_hops.py").write_text(HOPS_MODULE)
    (into / "jg_hops_driver.py").write_text(DRIVER)
    for name, anchor, stamped in PATCHES:
        path = into / name
        text = path.read_text()
        if text.count(anchor) != 1:
            raise SystemExit(f"{tree}: {name}: found {text.count(anchor)} of {anchor!r}")
        path.write_text(text.replace(anchor, stamped))


def run(copy: Path, out: Path, samples: int, rate: float, busy: int = 0) -> None:
    out.mkdir(parents=True)
    env = {**os.environ, "PYTHONPATH": str(copy), "JG_HOPS": str(out)}
    command = [sys.executable, "jg_hops_driver.py", str(out), str(samples), str(rate), str(busy)]
    subprocess.run(command, cwd=copy, env=env, check=True, stdout=subprocess.DEVNULL)


def tasks(out: Path) -> list[dict[str, int]]:
    """Each sampled task's stamps, by hop name (a hop's first stamp)."""
    found: dict[str, dict[str, int]] = {}
    for path in glob.glob(str(out / "hops.*")):
        for line in Path(path).read_text().splitlines():
            tag, key, at = line.split()
            found.setdefault(key, {}).setdefault(tag, int(at))
    rows = []
    for line in (out / "producer").read_text().splitlines():
        index, task_id, sent, answered, started = line.split()
        row = dict(found.get(task_id, {}))
        for tag, at in found.get("p" + index, {}).items():
            row["p_written" if tag == "x_write" else tag] = at
        row.update(p_send=int(sent), p_answer=int(answered), w_start=int(started))
        rows.append(row)
    return rows


def report(label: str, rows: list[dict[str, int]]) -> None:
    def line(name: str, parts: list[tuple[str, str]]) -> None:
        found = sorted(
            sum(r[b] - r[a] for a, b in parts) / 1e6
            for r in rows
            if all(a in r and b in r for a, b in parts)
        )
        if found:
            p90 = found[min(len(found) - 1, int(0.9 * len(found)))]
            print(f"  {name:52} {len(found):4} {statistics.median(found):7.3f} {p90:7.3f}")

    print(f"{label}  (ms: n, p50, p90)")
    present = [hop for hop in ORDER if any(hop in r for r in rows)]
    for a, b in itertools.pairwise(present):
        line(f"{a} -> {b}", [(a, b)])
    for name, parts in GROUPS.items():
        line(name, parts)
    total = sorted((r["w_start"] - r["p_send"]) / 1e6 for r in rows)
    p99 = total[min(len(total) - 1, round(0.99 * len(total)))]
    print(f"  enqueue to start: p50 {statistics.median(total):.3f}, p99 {p99:.3f} ms", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs="+", type=Path)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--samples", type=int, default=250)
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument(
        "--busy", type=int, default=0, help="no-op tasks another queue drains meanwhile"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        copies = []
        for n, tree in enumerate(args.trees):
            copies.append(Path(tmp) / f"tree{n}")
            instrument(tree.resolve(), copies[-1])
        for round_ in range(args.rounds):
            for tree, copy in zip(args.trees, copies, strict=True):
                out = Path(tmp) / f"hops-{copy.name}-{round_}"
                load = os.getloadavg()[0]
                run(copy, out, args.samples, args.rate, args.busy)
                label = f"{tree} round {round_ + 1}, load {load:.1f} -> {os.getloadavg()[0]:.1f}"
                report(label, tasks(out))


if __name__ == "__main__":
    main()
