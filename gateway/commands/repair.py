"""``jobgate dlq`` and ``jobgate clean``: dead letters back to work, finished tasks away.

::

    jobgate dlq list [--queue Q] [--name N] [--version V] [--owner O] [--since T] [--until T]
                     [--limit N] [--cursor C]
    jobgate dlq resubmit (ID... | FILTER... | --all) [--limit N] [--keep-attempts]
    jobgate clean QUEUE [--state S ...] [--name N] [--owner O] [--older-than DURATION] [--limit N]
                  [--yes]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from gateway.commands.common import (
    CommandError,
    confirmed,
    connect,
    int_between,
    note,
    parse_duration,
    parse_time,
    print_json,
)
from gateway.commands.table import Column, clip, moment, render, span
from sdk.wire import CleanRequest, DeadLetterFilter, Queue, Task, TaskState

FILTERS = ("queue", "name", "version", "owner", "since", "until")
FINISHED = tuple(state for state in TaskState if state.finished)


def add_commands(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], flags: argparse.ArgumentParser
) -> None:
    dlq = commands.add_parser(
        "dlq",
        help="list and resubmit dead letters",
        description="Dead letters: tasks that used up their attempts in a queue with "
        "dead_letter on. List them, or queue them again.",
    )
    dlq_commands = dlq.add_subparsers(title="commands", metavar="COMMAND", required=True)
    filters = _filter_flags()

    listing = dlq_commands.add_parser(
        "list",
        parents=[flags, filters],
        help="list dead letters with their last error",
        description="List dead letters of every queue (or --queue), oldest death first.",
    )
    listing.add_argument(
        "--limit", type=int_between(1, 1000), default=100, help="most listed (default: 100)"
    )
    listing.add_argument("--cursor", help="continue a listing where its last page ended")
    listing.set_defaults(run=_dlq_list)

    resubmit = dlq_commands.add_parser(
        "resubmit",
        parents=[flags, filters],
        help="queue dead letters again",
        description="Queue dead letters again: the given task ids, or those matching the "
        "filter flags, or with --all every one (up to --limit). Their attempt count starts "
        "again unless --keep-attempts; their history is kept either way.",
    )
    resubmit.add_argument("ids", nargs="*", metavar="ID", help="ids of dead tasks")
    resubmit.add_argument(
        "--all", action="store_true", help="every dead letter of every queue (up to --limit)"
    )
    resubmit.add_argument(
        "--limit",
        type=int_between(1, 1000),
        default=1000,
        help="most tasks a filter resubmits (default: 1000)",
    )
    resubmit.add_argument(
        "--keep-attempts", action="store_true", help="keep the attempt count, do not reset it"
    )
    resubmit.set_defaults(run=_dlq_resubmit)

    clean = commands.add_parser(
        "clean",
        parents=[flags],
        help="delete a queue's finished tasks now",
        description="Delete a queue's finished tasks now, before their retention ends. Asks "
        "for confirmation unless --yes.",
    )
    clean.add_argument("queue", metavar="QUEUE")
    clean.add_argument(
        "--state",
        dest="states",
        action="extend",
        type=_finished_states,
        metavar="STATE",
        help="only tasks in this state: succeeded, failed, dead or cancelled; repeat it or "
        "give a comma list (default: all four)",
    )
    clean.add_argument("--name", help="only tasks of this task name")
    clean.add_argument("--owner", help="only tasks of this owner (tenant id)")
    clean.add_argument(
        "--older-than",
        type=parse_duration,
        default=0.0,
        metavar="DURATION",
        help="only tasks finished at least this long ago: 90s, 30m, 12h, 7d (default: 0)",
    )
    clean.add_argument(
        "--limit",
        type=int_between(1, 100_000),
        default=10_000,
        help="most tasks deleted (default: 10000)",
    )
    clean.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")
    clean.set_defaults(run=_clean)


def _filter_flags() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(add_help=False)
    group = parser.add_argument_group("filter (every flag given must match)")
    group.add_argument("--queue", help="only this queue")
    group.add_argument("--name", help="only this task name")
    group.add_argument("--version", help="only this version of the task's code")
    group.add_argument("--owner", help="only this owner (tenant)")
    group.add_argument(
        "--since", type=parse_time, metavar="TIME", help="died at or after: RFC 3339, or 24h ago"
    )
    group.add_argument(
        "--until", type=parse_time, metavar="TIME", help="died before: RFC 3339, or 1h ago"
    )
    return parser


def _finished_states(text: str) -> list[TaskState]:
    states = []
    for part in text.split(","):
        try:
            state = TaskState(part.strip().lower())
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a task state: {part!r}") from None
        if not state.finished:
            names = ", ".join(s.value for s in FINISHED)
            raise argparse.ArgumentTypeError(f"{state.value} tasks are not finished ({names})")
        states.append(state)
    return states


# --- dlq list -----------------------------------------------------------------------------------


def _dlq_list(args: argparse.Namespace) -> int:
    with connect(args) as client:
        page = client.dead_letters(
            args.queue,
            args.name,
            args.version,
            args.owner,
            args.since,
            args.until,
            args.limit,
            args.cursor,
        )
    if args.json:
        print_json(page)
        return 0
    if page.items:
        sys.stdout.write(render(*dead_letter_table(page.items)))
    else:
        note("no dead letters" + (" match" if _filter_of(args) else ""))
    if page.next_cursor:
        note(f"more: run it again with --cursor {page.next_cursor}")
    return 0


def dead_letter_table(tasks: Sequence[Task]) -> tuple[list[Column], list[list[str | None]]]:
    columns = [
        Column("ID"),
        Column("QUEUE"),
        Column("NAME"),
        Column("VERSION"),
        Column("OWNER"),
        Column("ATTEMPTS", numeric=True),
        Column("DIED"),
        Column("ERROR"),
    ]
    rows: list[list[str | None]] = [
        [
            t.id,
            t.queue,
            t.name,
            t.version,
            t.owner,
            str(t.attempt),
            moment(t.finished_at),
            clip(t.error or _last_error(t)),
        ]
        for t in tasks
    ]
    return columns, rows


def _last_error(task: Task) -> str | None:
    errors = [a.error for a in task.attempts if a.error]
    return errors[-1] if errors else None


# --- dlq resubmit -------------------------------------------------------------------------------


def _filter_of(args: argparse.Namespace) -> dict[str, object]:
    return {name: getattr(args, name) for name in FILTERS if getattr(args, name) is not None}


def _dlq_resubmit(args: argparse.Namespace) -> int:
    fields = _filter_of(args)
    chosen = sum(1 for given in (args.ids, fields, args.all) if given)
    if chosen != 1:
        raise CommandError(
            "give either task ids, or filter flags (--queue, --name, --version, --owner, "
            "--since, --until), or --all"
        )
    with connect(args) as client:
        chosen_filter = DeadLetterFilter.model_validate(fields) if not args.ids else None
        result = client.resubmit(
            args.ids or None,
            filter=chosen_filter,
            limit=args.limit,
            reset_attempts=not args.keep_attempts,
        )
    if args.json:
        print_json(result)
        return 0
    count = len(result.resubmitted)
    print(f"requeued {count} dead letter{'' if count == 1 else 's'}")
    if result.skipped:
        print(f"skipped {len(result.skipped)}:")
        skipped = [[s.id, s.reason] for s in result.skipped]
        table = render([Column("ID"), Column("REASON")], skipped)
        sys.stdout.write("".join(f"  {line}\n" for line in table.splitlines()))
    return 0


# --- clean --------------------------------------------------------------------------------------


def _clean(args: argparse.Namespace) -> int:
    states: list[TaskState] = list(dict.fromkeys(args.states or FINISHED))
    with connect(args) as client:
        request = CleanRequest(
            states=states,
            name=args.name,
            owner=args.owner,
            older_than=args.older_than,
            limit=args.limit,
        )
        queue = client.get_queue(args.queue)  # an unknown queue fails before the question
        if not args.yes and not confirmed(_question(queue, request), "clean deletes tasks"):
            note("not confirmed: nothing deleted")
            return 1
        result = client.clean(
            args.queue,
            request.states,
            request.name,
            request.older_than,
            request.limit,
            request.owner,
        )
    if args.json:
        print_json(result)
        return 0
    print(f"deleted {result.deleted} task{'' if result.deleted == 1 else 's'} from {queue.name}")
    return 0


def _question(queue: Queue, request: CleanRequest) -> str:
    states = ", ".join(s.value for s in request.states)
    held = sum(queue.counts.get(s, 0) for s in request.states)
    what = f"{states} tasks"
    if request.name:
        what += f" named {request.name}"
    if request.owner:
        what += f" of owner {request.owner}"
    if request.older_than:
        what += f" finished over {span(request.older_than)} ago"
    return (
        f"Delete up to {request.limit} {what} from queue {queue.name}? "
        f"(it holds {held} {states} tasks in all) [y/N] "
    )
