"""Cold start of the SDK: what a fresh process pays before its first task, beside the import
time of the peers' client libraries, measured in the same run.

- **worker**: ``from sdk import Worker, task``, a ``Worker`` built with one task, its lifespan
  started, then the first push (signed by this process beforehand) verified, run and answered
  200, through ASGI in process (no server: the ASGI server is the user's choice);
- **producer**: ``from sdk import Client, task``, a ``Client`` built, and one ``.delay()``
  answered 201 by a real gateway (a managed Redis and ``python -m gateway serve``, started here);
- **import sdk** alone, and the peers' producer imports (the statements bench/peers.py times:
  Celery, Dramatiq with its Redis broker, taskiq-redis), each in a fresh interpreter; a peer not
  installed is left out (``make bench`` installs them with the ``[bench]`` extra);
- **interpreter**: ``python -c pass``, the floor every process pays.

Each figure is the median of ``--repeat`` fresh processes; the systems alternate within each
round so machine noise hits them alike. ``--python`` runs the SDK side in another interpreter,
e.g. a virtualenv holding only the ``jobgate-sdk`` wheel (``--light`` makes one in
bench/out/sdk-venv from ``make sdk-dist``'s wheel: what a user of the light distribution has).
``--source DIR`` (repeatable) puts a tree's ``sdk`` first on the path, to compare two trees in
one run (e.g. a ``git archive`` of the commit before a change). Peers run in this interpreter
(where ``make bench`` installs them), or in ``--peers-python``.

Run: ``.venv/bin/python -m bench.cold_start [--light] [--repeat 7]``. Loopback only.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

from standardwebhooks import Webhook

from gateway.serving.redis_server import ManagedRedis, free_port
from sdk import Client

if __package__ in (None, ""):  # run as a script: make the `bench` folder importable as a package
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.e2e import wait_http

ROOT = Path(__file__).resolve().parents[1]
CHILD = Path(__file__).with_name("cold_child.py")
LIGHT_VENV = ROOT / "bench" / "out" / "sdk-venv"
KEY = "bench-admin-key-0123456789"
SECRET = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
TASK_ID = "01JCOLDSTART0000000000000A"

# The producer imports bench/peers.py times for each peer (its IMPORTS).
PEERS = {
    "Celery": "from celery import Celery",
    "Dramatiq": "import dramatiq; from dramatiq.brokers.redis import RedisBroker",
    "taskiq (stream)": "from taskiq_redis import RedisStreamBroker",
}


def push() -> dict[str, str]:
    """The environment of a worker child: the push's body and signed headers."""
    now = datetime.now(UTC)
    body = json.dumps(
        {
            "id": TASK_ID,
            "queue": "cold",
            "name": "double",
            "payload": {"args": [21], "kwargs": {}},
            "attempt": 1,
            "checkpoint": None,
            "lease_expires_at": (now + timedelta(minutes=10)).isoformat(),
            "deadline": (now + timedelta(hours=1)).isoformat(),
        }
    )
    headers = {
        "content-type": "application/json",
        "webhook-id": TASK_ID,
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": Webhook(SECRET).sign(TASK_ID, now, body),
        "jobgate-lease": "cold-lease",
        "jobgate-callback": "http://127.0.0.1:9/v1/tasks/" + TASK_ID,
    }
    return {"COLD_SECRET": SECRET, "COLD_BODY": body, "COLD_HEADERS": json.dumps(headers)}


def child(python: str, source: Path, mode: str, env: dict[str, str]) -> dict[str, float]:
    """One cold start; ``process`` is the wall time from spawn to exit."""
    began = time.perf_counter()
    done = subprocess.run(
        [python, str(CHILD), mode],
        env={**os.environ, **env, "PYTHONPATH": str(source)},
        cwd=tempfile.gettempdir(),  # not the repository: only PYTHONPATH says where sdk is
        capture_output=True,
        text=True,
    )
    if done.returncode:
        raise SystemExit(f"{mode} cold start failed:\n{done.stderr}")
    found: dict[str, float] = json.loads(done.stdout.splitlines()[-1])
    found["process"] = time.perf_counter() - began
    return found


def seconds(python: str, statement: str, source: Path | None = None) -> tuple[float, float]:
    """Seconds ``statement`` takes in a fresh interpreter (its start-up not counted), as
    bench/peers.py measures it, and the CPU seconds it took."""
    code = (
        "import time; t = time.perf_counter(); c = time.process_time(); "
        f"{statement}; print(time.perf_counter() - t, time.process_time() - c)"
    )
    env = {**os.environ, "PYTHONPATH": str(source)} if source else None
    done = subprocess.run(
        [python, "-c", code], env=env, cwd=tempfile.gettempdir(), capture_output=True, text=True
    )
    if done.returncode:
        return float("nan"), float("nan")  # not installed
    took, cpu = done.stdout.split()[-2:]
    return float(took), float(cpu)


def wall(python: str) -> float:
    began = time.perf_counter()
    subprocess.run([python, "-c", "pass"], check=True)
    return time.perf_counter() - began


@contextmanager
def gateway() -> Iterator[str]:
    """A managed Redis and one gateway with queue ``cold`` (paused: nothing is dispatched)."""
    with tempfile.TemporaryDirectory() as tmp, ManagedRedis(Path(tmp)) as redis:
        port = free_port()
        env = {
            **os.environ,
            "JOBGATE_REDIS_URL": redis.url,
            "JOBGATE_API_KEYS": json.dumps([{"key": KEY, "scopes": ["admin"]}]),
            "JOBGATE_LOG_LEVEL": "warning",
            "JOBGATE_PORT": str(port),
        }
        proc = subprocess.Popen([sys.executable, "-m", "gateway", "serve"], env=env, cwd=ROOT)
        try:
            url = f"http://127.0.0.1:{port}"
            wait_http(url + "/healthz", proc)
            with Client(url, KEY) as client:
                client.put_queue("cold", paused=True)
            yield url
        finally:
            proc.terminate()
            proc.wait(15)


def light_venv() -> str:
    """bench/out/sdk-venv's python: a virtualenv with only the jobgate-sdk wheel installed."""
    python = LIGHT_VENV / "bin" / "python"
    if not python.exists():
        wheels = sorted((ROOT / "dist").glob("jobgate_sdk-*.whl"))
        if not wheels:
            raise SystemExit("no dist/jobgate_sdk-*.whl: run `make sdk-dist` first")
        subprocess.run([sys.executable, "-m", "venv", str(LIGHT_VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", str(wheels[-1])], check=True)
    return str(python)


def ms(values: Sequence[float]) -> str:
    values = [v for v in values if v == v]  # NaN: not installed
    return f"{statistics.median(values) * 1000:.0f}" if values else "n/a"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--python", default=sys.executable, help="the SDK side's interpreter")
    parser.add_argument("--light", action="store_true", help="use bench/out/sdk-venv")
    parser.add_argument("--source", type=Path, action="append", help="a tree holding sdk/")
    parser.add_argument(
        "--peers-python", default=sys.executable, help="where Celery, Dramatiq, taskiq are"
    )
    options = parser.parse_args()
    python = light_venv() if options.light else options.python
    sources: list[Path] = options.source or [ROOT]
    steps = ("import", "import cpu", "build", "startup", "first", "process", "cpu")
    rows: dict[tuple[str, Path], dict[str, list[float]]] = {}
    imports: dict[str, list[tuple[float, float]]] = {}
    with gateway() as url:
        for number in range(options.repeat):
            print(f"round {number + 1}/{options.repeat}", file=sys.stderr, flush=True)
            turn = number % len(sources)
            for source in sources[turn:] + sources[:turn]:
                for mode, env in (("worker", push()), ("producer", {"COLD_URL": url})):
                    env["COLD_KEY"] = KEY
                    found = child(python, source, mode, env)
                    row = rows.setdefault((mode, source), {})
                    for step, value in found.items():
                        row.setdefault(step, []).append(value)
                imports.setdefault(f"import sdk ({source.name})", []).append(
                    seconds(python, "import sdk", source)
                )
            for label, statement in PEERS.items():
                imports.setdefault(label, []).append(seconds(options.peers_python, statement))
            imports.setdefault("interpreter start (python -c pass)", []).append(
                (wall(python), float("nan"))
            )
    print(f"SDK: `{python}`; peers: `{options.peers_python}`; {options.repeat} rounds\n")
    print("| cold start | tree | " + " | ".join(f"{s} (ms)" for s in steps) + " | modules |")
    print("|---|---|" + "---:|" * (len(steps) + 1))
    for (mode, source), row in rows.items():
        cells = " | ".join(ms(row[s]) if s in row else "n/a" for s in steps)
        print(f"| {mode} | {source.name} | {cells} | {int(statistics.median(row['modules']))} |")
    print("\n| import (fresh interpreter) | ms | CPU ms |\n|---|---:|---:|")
    for label, values in imports.items():
        print(f"| {label} | {ms([v[0] for v in values])} | {ms([v[1] for v in values])} |")


if __name__ == "__main__":
    main()
