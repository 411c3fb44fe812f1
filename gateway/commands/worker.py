"""``jobgate worker --pull``: run an SDK worker's tasks by leasing them from the gateway.

::

    jobgate worker --pull --queue Q --endpoint EP [--max-tasks N] [--wait S] module:worker

``module:worker`` names a :class:`~sdk.worker.Worker` (imported from the current folder, as
ASGI servers do); its tasks, ``max_concurrency`` and ``shutdown`` policy are used. The gateway
is ``--url``/``--api-key`` or ``JOBGATE_URL``/``JOBGATE_API_KEY``; the key needs the
``work:<queue>`` scope (or admin). SIGTERM or SIGINT stops leasing, then the worker's shutdown
policy applies to the tasks still running; the process exits once they are reported.
Push workers are ASGI apps: serve them with an ASGI server (uvicorn, hypercorn), not this.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import logging
import os
import signal
import sys
from typing import Any

import httpx

from gateway.commands.common import CommandError, UsageError, describe, int_between
from sdk.client import ENV_API_KEY, ENV_URL, AsyncClient
from sdk.errors import ApiError
from sdk.worker import Worker

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    worker = commands.add_parser(
        "worker",
        help="run a worker's tasks by pulling them (for workers the gateway cannot reach)",
        description="Lease tasks of a pull endpoint with long polls and run them with an SDK "
        "Worker's task functions, heartbeats, checkpoints and shutdown policy. SIGTERM stops "
        "leasing, then the shutdown policy applies.",
    )
    worker.add_argument("target", metavar="MODULE:WORKER", help="the Worker, e.g. app:worker")
    worker.add_argument(
        "--pull", action="store_true", required=True, help="lease tasks (the only mode here)"
    )
    worker.add_argument("--queue", required=True, help="the queue to lease from")
    worker.add_argument(
        "--endpoint", required=True, help="the pull endpoint's id (registered with pull: true)"
    )
    worker.add_argument(
        "--max-tasks",
        type=int_between(1, 100),
        default=10,
        help="most tasks one lease asks for; never more than the free slots (default: 10)",
    )
    worker.add_argument(
        "--wait", type=float, default=30.0, help="seconds each long poll waits (default: 30)"
    )
    worker.add_argument("--url", help=f"the gateway's URL (default: ${ENV_URL})")
    worker.add_argument("--api-key", help=f"API key with work:<queue> (default: ${ENV_API_KEY})")
    worker.add_argument(
        "--log-level",
        choices=("debug", "info", "warning", "error"),
        default="info",
        help="log level (default: info)",
    )
    worker.set_defaults(run=_worker)


def load_worker(target: str) -> Worker:
    """The Worker named ``module:attribute``, imported with the current folder on the path."""
    module_name, _, attribute = target.partition(":")
    if not module_name or not attribute:
        raise CommandError(f"name the worker as MODULE:ATTRIBUTE, not {target!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise CommandError(f"cannot import {module_name!r}: {e}") from None
    found: Any = getattr(module, attribute, None)
    if not isinstance(found, Worker):
        raise CommandError(f"{target} is not a jobgate Worker")
    return found


def _worker(args: argparse.Namespace) -> int:
    url = args.url or os.environ.get(ENV_URL)
    if not url:
        raise CommandError(f"no gateway URL: pass --url or set {ENV_URL}")
    if not 0 <= args.wait <= 60:
        raise UsageError("--wait must be between 0 and 60 seconds")
    worker = load_worker(args.target)
    logging.basicConfig(level=args.log_level.upper(), format=LOG_FORMAT)
    api_key = args.api_key or os.environ.get(ENV_API_KEY) or None
    try:
        asyncio.run(_pull(worker, AsyncClient(url, api_key), args))
    except ApiError as e:
        raise CommandError(describe(e)) from None
    return 0


async def _pull(worker: Worker, client: AsyncClient, args: argparse.Namespace) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    log = logging.getLogger("jobgate.worker")
    log.info(
        "pulling tasks of queue %s for endpoint %s from %s", args.queue, args.endpoint, client.url
    )
    try:
        async with client:
            pulling = worker.pull(
                client, args.queue, args.endpoint, max_tasks=args.max_tasks, wait=args.wait
            )
            await pulling.run(stop)
    except httpx.InvalidURL as e:
        raise CommandError(f"invalid gateway URL: {e}") from None
    log.info("stopped")
