"""``jobgate queues`` and ``jobgate tasks``: what waits in the queues, and what runs where.

::

    jobgate queues                                         every queue and its task counts
    jobgate tasks QUEUE [--state S] [--owner O] [--limit N] [--cursor C]
    jobgate tasks --running [--queue Q] [--owner O] [--limit N]
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Callable, Sequence

from gateway.commands.common import (
    UsageError,
    connect,
    int_between,
    note,
    print_json,
)
from gateway.commands.table import Column, clip, moment, percent, render, span, yes_no
from sdk.client import Client
from sdk.errors import ApiError
from sdk.wire import Endpoint, QueueList, RunningTask, Task, TaskState

QUEUE_STATES = (
    TaskState.QUEUED,
    TaskState.SCHEDULED,
    TaskState.WAITING,
    TaskState.RUNNING,
    TaskState.SUCCEEDED,
    TaskState.FAILED,
    TaskState.DEAD,
)
"""The counts ``jobgate queues`` shows (cancelled ones are in ``--json``)."""

DEFAULT_RUNNING_LIMIT = 500
# The most tasks one listing may ask for: the gateway's own bounds (GET .../tasks, /v1/running).
MAX_LIMIT = 500
MAX_RUNNING_LIMIT = 5000

Rows = list[list[str | None]]


def add_commands(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], flags: argparse.ArgumentParser
) -> None:
    queues = commands.add_parser(
        "queues",
        parents=[flags],
        help="list the queues with their task counts",
        description="List every queue: paused or not, its tasks in each state, and its worker "
        "endpoints (enabled ones; 'enabled/all' when some are disabled).",
    )
    queues.set_defaults(run=_queues)

    tasks = commands.add_parser(
        "tasks",
        parents=[flags],
        help="list a queue's tasks in one state, or the running tasks",
        description="List one page of a queue's tasks in one state (queued by default), or "
        "with --running the tasks running now in every queue: where, for how long, their "
        "last heartbeat and progress, and whether they stalled.",
    )
    tasks.add_argument("queue", nargs="?", metavar="QUEUE", help="the queue to list")
    tasks.add_argument(
        "--state",
        choices=[s.value for s in TaskState],
        help="which tasks (default: queued)",
    )
    tasks.add_argument("--owner", help="only tasks of this owner (tenant)")
    tasks.add_argument(
        "--limit",
        type=int_between(1, 100_000),
        help=f"most tasks listed (default: 50; with --running {DEFAULT_RUNNING_LIMIT})",
    )
    tasks.add_argument("--cursor", help="continue a listing where its last page ended")
    tasks.add_argument(
        "--running", action="store_true", help="the running tasks of every queue, or of --queue"
    )
    tasks.add_argument(
        "--queue", dest="only_queue", metavar="QUEUE", help="with --running: only this queue"
    )
    tasks.set_defaults(run=_tasks)


# --- queues -------------------------------------------------------------------------------------


def _queues(args: argparse.Namespace) -> int:
    with connect(args) as client:
        queues = client.list_queues()
        if args.json:
            print_json(QueueList(items=queues))
            return 0
        endpoints = {queue.name: _endpoints_of(client, queue.name) for queue in queues}
    if not queues:
        note("no queues yet: create one with PUT /v1/queues/{queue} or Client.put_queue")
        return 0
    columns = [
        Column("QUEUE"),
        Column("PAUSED"),
        *(Column(state.value.upper(), numeric=True) for state in QUEUE_STATES),
        Column("ENDPOINTS", numeric=True),
    ]
    rows: Rows = [
        [
            queue.name,
            yes_no(queue.policy.paused),
            *(str(queue.counts.get(state, 0)) for state in QUEUE_STATES),
            _endpoints_cell(endpoints[queue.name]),
        ]
        for queue in queues
    ]
    sys.stdout.write(render(columns, rows))
    return 0


def _endpoints_of(client: Client, queue: str) -> list[Endpoint] | None:
    try:
        return client.list_endpoints(queue)
    except ApiError as e:
        if e.status == 404:  # deleted since it was listed
            return None
        raise


def _endpoints_cell(endpoints: list[Endpoint] | None) -> str | None:
    if endpoints is None:
        return None
    enabled = sum(1 for e in endpoints if e.enabled)
    return str(enabled) if enabled == len(endpoints) else f"{enabled}/{len(endpoints)}"


# --- tasks --------------------------------------------------------------------------------------


def _tasks(args: argparse.Namespace) -> int:
    if args.queue and args.only_queue and args.queue != args.only_queue:
        raise UsageError(f"two queues given: {args.queue!r} and --queue {args.only_queue!r}")
    queue: str | None = args.queue or args.only_queue
    most = MAX_RUNNING_LIMIT if args.running else MAX_LIMIT
    if args.limit is not None and args.limit > most:
        raise UsageError(f"--limit must be from 1 to {most}, not {args.limit}")
    if args.running:
        if args.state or args.cursor:
            raise UsageError("--state and --cursor do not apply to --running")
        return _running(args, queue)
    if queue is None:
        raise UsageError("give a QUEUE, or --running for the running tasks")
    state = TaskState(args.state or TaskState.QUEUED)
    with connect(args) as client:
        page = client.list_tasks(queue, state, args.limit, args.cursor, args.owner)
    if args.json:
        print_json(page)
        return 0
    if page.items:
        columns, rows = task_table(state, page.items)
        sys.stdout.write(render(columns, rows))
    else:
        note(f"no {state.value} tasks in {queue}")
    if page.next_cursor:
        again = ["jobgate", "tasks", queue, "--state", state.value, "--cursor", page.next_cursor]
        if args.owner:
            again += ["--owner", args.owner]
        note(f"more: {shlex.join(again)}")
    return 0


def task_table(state: TaskState, tasks: Sequence[Task]) -> tuple[list[Column], Rows]:
    """The columns that matter for tasks in ``state``, and a row per task."""
    extra, cells = _state_columns(state)
    columns = [
        Column("ID"),
        Column("NAME"),
        Column("ATTEMPTS", numeric=True),
        Column("PRIORITY", numeric=True),
        Column("OWNER"),
        *extra,
    ]
    rows: Rows = [
        [t.id, t.name, f"{t.attempt}/{t.max_attempts}", str(t.priority), t.owner, *cells(t)]
        for t in tasks
    ]
    return columns, rows


def _state_columns(state: TaskState) -> tuple[list[Column], Callable[[Task], list[str | None]]]:
    if state is TaskState.SCHEDULED:
        return [Column("DUE")], lambda t: [moment(t.run_at)]
    if state is TaskState.QUEUED:
        return [Column("CREATED")], lambda t: [moment(t.created_at)]
    if state is TaskState.WAITING:
        return [Column("CREATED"), Column("WAITING ON")], lambda t: [
            moment(t.created_at),
            clip(",".join(t.waiting_on), 40),
        ]
    if state is TaskState.RUNNING:
        columns = [Column("STARTED"), Column("HEARTBEAT"), Column("PROGRESS", numeric=True)]
        return [*columns, Column("STALLED")], lambda t: [
            moment(t.started_at),
            moment(t.last_heartbeat_at),
            percent(t.progress),
            _stalled(t.stalled),
        ]
    if state is TaskState.SUCCEEDED:
        return [Column("FINISHED")], lambda t: [moment(t.finished_at)]
    return [Column("FINISHED"), Column("ERROR")], lambda t: [
        moment(t.finished_at),
        clip(t.error),
    ]


def _stalled(flag: bool) -> str | None:
    return "STALLED" if flag else None


# --- running ------------------------------------------------------------------------------------


def _running(args: argparse.Namespace, queue: str | None) -> int:
    limit = args.limit or DEFAULT_RUNNING_LIMIT
    with connect(args) as client:
        listed = client.running(queue, args.owner, limit)
    if args.json:
        print_json(listed)
        return 0
    if listed.items:
        sys.stdout.write(render(*running_table(listed.items)))
    else:
        note("no tasks running" + (f" in {queue}" if queue else ""))
    if listed.truncated:
        note(f"more tasks are running than the {limit} shown: raise --limit")
    return 0


def running_table(tasks: Sequence[RunningTask]) -> tuple[list[Column], Rows]:
    columns = [
        Column("ID"),
        Column("QUEUE"),
        Column("NAME"),
        Column("ATTEMPT", numeric=True),
        Column("ENDPOINT"),
        Column("ELAPSED", numeric=True),
        Column("HEARTBEAT", numeric=True),
        Column("PROGRESS", numeric=True),
        Column("STALLED"),
    ]
    rows: Rows = [
        [
            t.id,
            t.queue,
            t.name,
            str(t.attempt),
            t.endpoint_url or t.endpoint_id,
            span(t.elapsed),
            _heartbeat_age(t),
            percent(t.progress),
            _stalled(t.stalled),
        ]
        for t in tasks
    ]
    return columns, rows


def _heartbeat_age(task: RunningTask) -> str | None:
    """How long ago the last heartbeat came, on the gateway's clock (start + elapsed is its
    now), so a skewed clock here cannot make it look fresh or stale."""
    if task.last_heartbeat_at is None:
        return None
    now = task.started_at.timestamp() + task.elapsed
    return f"{span(max(now - task.last_heartbeat_at.timestamp(), 0.0))} ago"
