"""``jobgate jobs``: recurring and on-demand jobs, and their runs.

::

    jobgate jobs list [--limit N] [--cursor C]         every job: task, schedule, next and last run
    jobgate jobs show JOB [--count N]                  one job, with its next fire times
    jobgate jobs run JOB [--args JSON] [--queue Q] [--start-at TIME] [--title T] [--note N]
    jobgate jobs pause JOB | resume JOB                stop or start its schedule
    jobgate jobs delete JOB [--yes]                    the job and its run records
    jobgate jobs runs JOB [--status S] [--limit N] [--cursor C]
    jobgate jobs logs JOB RUN                          the log lines of one run
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from gateway.commands.common import (
    confirmed,
    connect,
    int_between,
    note,
    parse_duration,
    print_json,
)
from gateway.commands.table import Column, clip, moment, render, span, yes_no
from sdk.schedules import schedule_text
from sdk.wire import Job, JobPage, Run, RunStatus

Rows = list[list[str | None]]


def add_commands(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], flags: argparse.ArgumentParser
) -> None:
    jobs = commands.add_parser(
        "jobs",
        help="list, run, pause and resume jobs; their runs and logs",
        description="Jobs: tasks the gateway runs on a schedule or when asked (docs/jobs.md).",
    )
    sub = jobs.add_subparsers(title="commands", metavar="COMMAND", required=True)

    listing = sub.add_parser("list", parents=[flags], help="list the jobs, oldest first")
    _page_flags(listing, 500)
    listing.set_defaults(run=_list)

    show = sub.add_parser("show", parents=[flags], help="one job, with its next fire times")
    show.add_argument("job", metavar="JOB", help="the job's id")
    show.add_argument(
        "--count", type=int_between(1, 100), default=5, help="fire times shown (default: 5)"
    )
    show.set_defaults(run=_show)

    run = sub.add_parser(
        "run",
        parents=[flags],
        help="run a job now",
        description="Run a job now, whatever its schedule, active flag and overlap policy say.",
    )
    run.add_argument("job", metavar="JOB", help="the job's id")
    run.add_argument(
        "--args",
        type=_json,
        metavar="JSON",
        help="this run's args instead of the job's, e.g. '{\"kwargs\": {\"days\": 7}}'",
    )
    run.add_argument("--queue", help="another registered queue for this run")
    run.add_argument(
        "--start-at",
        type=_later,
        metavar="TIME",
        help="not before: RFC 3339, or a duration from now (30m)",
    )
    run.add_argument("--title", help="this run's title (default: the job's)")
    run.add_argument("--note", help="a note kept with the run")
    run.set_defaults(run=_run)

    for name, active, what in (("pause", False, "stop"), ("resume", True, "start")):
        toggle = sub.add_parser(
            name,
            parents=[flags],
            help=f"{what} the job's schedule",
            description=f"{what.capitalize()} the job's schedule (its active flag). A resumed "
            "job does not replay what it missed. Run now works either way.",
        )
        toggle.add_argument("job", metavar="JOB", help="the job's id")
        toggle.set_defaults(run=_toggle, active=active)

    delete = sub.add_parser(
        "delete",
        parents=[flags],
        help="delete a job and its run records",
        description="Delete a job and its run records; the tasks of its runs stay in their "
        "queue, running ones go on. Asks for confirmation unless --yes.",
    )
    delete.add_argument("job", metavar="JOB", help="the job's id")
    delete.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")
    delete.set_defaults(run=_delete)

    runs = sub.add_parser("runs", parents=[flags], help="a job's runs, newest first")
    runs.add_argument("job", metavar="JOB", help="the job's id")
    runs.add_argument(
        "--status", choices=[s.value for s in RunStatus], help="only runs with this status"
    )
    _page_flags(runs, 500)
    runs.set_defaults(run=_runs)

    logs = sub.add_parser("logs", parents=[flags], help="the log lines of one run")
    logs.add_argument("job", metavar="JOB", help="the job's id")
    logs.add_argument("run_id", metavar="RUN", help="the run's id")
    logs.set_defaults(run=_logs)


def _page_flags(parser: argparse.ArgumentParser, most: int) -> None:
    parser.add_argument(
        "--limit", type=int_between(1, most), default=50, help="most listed (default: 50)"
    )
    parser.add_argument("--cursor", help="continue a listing where its last page ended")


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"not JSON: {e}") from None


def _later(text: str) -> datetime:
    """An RFC 3339 time with its offset, or a duration meaning that long from now."""
    try:
        return datetime.now(UTC) + timedelta(seconds=parse_duration(text))
    except argparse.ArgumentTypeError:
        pass
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError:
        value = None
    if value is None or value.tzinfo is None:
        raise argparse.ArgumentTypeError(
            f"not a time: {text!r} (use RFC 3339 with an offset, like 2030-01-01T00:00:00Z, "
            "or 30m: half an hour from now)"
        )
    return value


# --- jobs ---------------------------------------------------------------------------------------


def _list(args: argparse.Namespace) -> int:
    with connect(args) as client:
        page = client.list_jobs(args.limit, args.cursor)
    if args.json:
        print_json(page)
        return 0
    _print_jobs(page)
    return 0


def _print_jobs(page: JobPage) -> None:
    if page.items:
        sys.stdout.write(render(*job_table(page.items)))
    else:
        note("no jobs yet: define one with POST /v1/jobs, Client.create_job or /admin/jobs")
    if page.next_cursor:
        note(f"more: {shlex.join(['jobgate', 'jobs', 'list', '--cursor', page.next_cursor])}")


def job_table(jobs: Sequence[Job]) -> tuple[list[Column], Rows]:
    columns = [
        Column("ID"),
        Column("TITLE"),
        Column("TASK"),
        Column("SCHEDULE"),
        Column("ACTIVE"),
        Column("NEXT RUN"),
        Column("LAST RUN"),
        Column("RUNS", numeric=True),
    ]
    rows: Rows = [
        [
            j.id,
            clip(j.title, 40),
            f"{j.task.queue}/{j.task.name}",
            schedule_text(j.schedule),
            yes_no(j.active),
            moment(j.next_run),
            j.last_run.status.value if j.last_run else None,
            str(j.run_count),
        ]
        for j in jobs
    ]
    return columns, rows


def _show(args: argparse.Namespace) -> int:
    with connect(args) as client:
        job = client.get_job(args.job)
        if args.json:
            print_json(job)
            return 0
        fire_times = client.preview_job(job.id, args.count)
    last = job.last_run
    lines = [
        ("id", job.id),
        ("title", job.title),
        ("description", clip(job.description, 200)),
        ("task", f"{job.task.queue}/{job.task.name}" + ("" if job.served else " (not served)")),
        ("args", json.dumps(job.args)),
        ("schedule", schedule_text(job.schedule)),
        ("active", yes_no(job.active)),
        ("overlap", job.overlap.value),
        ("notify", job.notify),
        ("runs", f"{job.run_count} ({job.skipped_count} firings skipped)"),
        ("last run", f"{last.id} {last.status.value} {moment(last.created_at)}" if last else None),
        ("next runs", " ".join(moment(t) or "" for t in fire_times.items) or None),
    ]
    sys.stdout.write(render([Column("FIELD"), Column("VALUE")], [list(line) for line in lines]))
    return 0


def _toggle(args: argparse.Namespace) -> int:
    with connect(args) as client:
        job = client.update_job(args.job, active=args.active)
    if args.json:
        print_json(job)
        return 0
    done = "resumed" if job.active else "paused"
    after = f"; next run {moment(job.next_run)}" if job.next_run else ""
    print(f"{done} job {job.id} ({job.title}){after}")
    return 0


def _delete(args: argparse.Namespace) -> int:
    with connect(args) as client:
        job = client.get_job(args.job)  # an unknown job fails before the question
        question = f"Delete job {job.id} ({job.title}) and its {job.run_count} run records? [y/N] "
        if not args.yes and not confirmed(question, "delete removes the job"):
            note("not confirmed: nothing deleted")
            return 1
        client.delete_job(job.id)
    print(f"deleted job {job.id} ({job.title})")
    return 0


# --- runs ---------------------------------------------------------------------------------------


def _run(args: argparse.Namespace) -> int:
    given = {
        "queue": args.queue,
        "start_at": args.start_at,
        "title": args.title,
        "note": args.note,
    }
    fields: dict[str, Any] = {k: v for k, v in given.items() if v is not None}
    if args.args is not None:
        fields["payload"] = args.args
    with connect(args) as client:
        run = client.run_job(args.job, **fields)
    if args.json:
        print_json(run)
        return 0
    sys.stdout.write(render(*run_table([run])))
    return 0


def _runs(args: argparse.Namespace) -> int:
    with connect(args) as client:
        page = client.list_runs(args.job, args.status, args.limit, args.cursor)
    if args.json:
        print_json(page)
        return 0
    if page.items:
        sys.stdout.write(render(*run_table(page.items)))
    else:
        note("no runs" + (f" with status {args.status}" if args.status else ""))
    if page.next_cursor:
        again = ["jobgate", "jobs", "runs", args.job, "--cursor", page.next_cursor]
        if args.status:
            again += ["--status", args.status]
        note(f"more: {shlex.join(again)}")
    return 0


def run_table(runs: Sequence[Run]) -> tuple[list[Column], Rows]:
    columns = [
        Column("ID"),
        Column("STATUS"),
        Column("STARTED BY"),
        Column("QUEUE"),
        Column("CREATED"),
        Column("TOOK", numeric=True),
        Column("ATTEMPTS", numeric=True),
        Column("MESSAGE"),
    ]
    rows: Rows = [
        [
            r.id,
            r.status.value,
            r.started_by,
            r.queue,
            moment(r.created_at),
            _took(r),
            str(r.attempts),
            clip(r.message),
        ]
        for r in runs
    ]
    return columns, rows


def _took(run: Run) -> str | None:
    if run.started_at is None or run.ended_at is None:
        return None
    return span((run.ended_at - run.started_at).total_seconds())


def _logs(args: argparse.Namespace) -> int:
    with connect(args) as client:
        page = client.run_logs(args.job, args.run_id)
    if args.json:
        print_json(page)
        return 0
    if not page.items:
        note("no log lines")
    for line in page.items:
        print(f"{moment(line.at) or '-'}  {line.level:<7}  {line.message}")
    if page.dropped:
        note(f"{page.dropped} earlier lines were dropped (the gateway keeps the newest)")
    if page.next_cursor:
        note(f"more lines: GET /v1/tasks/{args.run_id}/logs?cursor={page.next_cursor}")
    return 0
