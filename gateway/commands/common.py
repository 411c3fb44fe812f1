"""What the operator commands share: the gateway flags, argument types, output and errors.

Every operator command takes ``--url`` and ``--api-key`` (defaults: ``JOBGATE_URL`` and
``JOBGATE_API_KEY``, as :meth:`sdk.client.Client.from_env`) and ``--json``, which prints the
gateway's answer as the HTTP API returns it instead of a table.

Failures end as :class:`CommandError`, one ``jobgate: error: ...`` message and exit code 1,
never a traceback: a refused request shows the problem's title, detail and field errors; an
unreachable gateway one line saying so.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

import httpx
from pydantic import BaseModel, ValidationError

from sdk.client import ENV_API_KEY, ENV_URL, Client
from sdk.errors import ApiError
from sdk.wire.base import reason

TIMEOUT = 30.0
"""Seconds one request may take: cleaning a big queue is one request."""

_DURATION = re.compile(r"(\d+(?:\.\d+)?)([wdhms])")
_UNITS = {"w": 604_800, "d": 86_400, "h": 3600, "m": 60, "s": 1}
_ERRNO = re.compile(r"^\[Errno -?\d+\]\s*")


class CommandError(Exception):
    """A failure the user can fix; printed as ``jobgate: error: ...``, exit code 1."""


class UsageError(CommandError):
    """Arguments that do not go together, or one missing that argparse cannot require: printed
    after the command's usage line, as argparse prints its own, exit code 2."""


def gateway_flags() -> argparse.ArgumentParser:
    """The flags of every operator command, as a parent parser."""
    parser = argparse.ArgumentParser(add_help=False)
    group = parser.add_argument_group("gateway")
    group.add_argument("--url", help=f"the gateway's URL (default: ${ENV_URL})")
    group.add_argument(
        "--api-key", help=f"API key, sent as a bearer token (default: ${ENV_API_KEY})"
    )
    group.add_argument(
        "--json", action="store_true", help="print the gateway's answer as JSON, not a table"
    )
    return parser


@contextmanager
def connect(args: argparse.Namespace) -> Iterator[Client]:
    """A client of the gateway the flags name; SDK and network errors become CommandError."""
    url = args.url or os.environ.get(ENV_URL)
    if not url:
        raise CommandError(
            f"no gateway URL: pass --url or set {ENV_URL} (e.g. http://127.0.0.1:8787)"
        )
    if not url.startswith(("http://", "https://")):
        raise CommandError(f"the gateway URL must start with http:// or https://, not {url!r}")
    api_key = args.api_key or os.environ.get(ENV_API_KEY) or None
    client = Client(url, api_key, timeout=TIMEOUT)
    try:
        yield client
    except ApiError as e:
        hint = ""
        if e.status == 401 and api_key is None:
            hint = f"\n  (no API key given: pass --api-key or set {ENV_API_KEY})"
        raise CommandError(describe(e) + hint) from None
    except httpx.TimeoutException:
        raise CommandError(f"the gateway at {url} did not answer within {TIMEOUT:g}s") from None
    except httpx.TransportError as e:
        reason = _ERRNO.sub("", str(e)) or type(e).__name__
        raise CommandError(f"cannot reach the gateway at {url}: {reason}") from None
    except httpx.InvalidURL as e:
        raise CommandError(f"invalid gateway URL {url!r}: {e}") from None
    except ValidationError as e:  # an input the SDK checked before sending
        raise CommandError(f"invalid input: {_validation(e)}") from None
    finally:
        client.close()


def describe(error: ApiError) -> str:
    """``422 Validation failed: detail``, then a line per field error; a detail that only
    repeats the field errors is left out."""
    problem = error.problem
    fields = [f"{e.field}: {e.reason}" for e in problem.errors or ()]
    text = f"{error.status} {problem.title}"
    if problem.detail and not (fields and all(f in problem.detail for f in fields)):
        text += f": {problem.detail}"
    return text + "".join(f"\n  {line}" for line in fields)


def _validation(error: ValidationError) -> str:
    problems = []
    for err in error.errors():
        where = ".".join(str(part) for part in err["loc"])
        message = reason(err)
        problems.append(f"{where}: {message}" if where else message)
    return "; ".join(problems)


def print_json(model: BaseModel) -> None:
    sys.stdout.write(model.model_dump_json(indent=2) + "\n")


def note(message: str) -> None:
    """A remark beside the output (empty result, more pages): on stderr, so the table on
    stdout stays clean for ``grep`` and ``awk``."""
    print(message, file=sys.stderr)


def confirmed(question: str, action: str) -> bool:
    """Ask ``question`` on the terminal; a stdin that is not one (a pipe, cron) is refused,
    not read: ``action`` says what would have happened (``clean deletes tasks``)."""
    if sys.stdin is None or not sys.stdin.isatty():
        raise CommandError(f"{action} and stdin is not a terminal to confirm it: pass --yes")
    sys.stderr.write(question)
    sys.stderr.flush()
    return sys.stdin.readline().strip().lower() in ("y", "yes")


# --- argument types -----------------------------------------------------------------------------


def int_between(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: an integer from ``low`` to ``high``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be from {low} to {high}, not {value}")
        return value

    return parse


def parse_duration(text: str) -> float:
    """Seconds from ``90s``, ``30m``, ``12h``, ``7d``, ``2w``, combinations like ``1h30m``, or a
    plain number of seconds."""
    spec = text.strip().lower()
    try:
        seconds = float(spec)
    except ValueError:
        parts = _DURATION.findall(spec)
        if not parts or "".join(n + u for n, u in parts) != spec:
            raise argparse.ArgumentTypeError(
                f"not a duration: {text!r} (use e.g. 90s, 30m, 12h, 7d or 1h30m)"
            ) from None
        seconds = sum(float(number) * _UNITS[unit] for number, unit in parts)
    if seconds < 0 or not math.isfinite(seconds):
        raise argparse.ArgumentTypeError(f"not a duration of zero or more seconds: {text!r}")
    return seconds


def parse_time(text: str) -> datetime:
    """An RFC 3339 time with its offset (``2030-01-01T00:00:00Z``), or a duration meaning that
    long ago (``24h``)."""
    try:
        ago = parse_duration(text)
    except argparse.ArgumentTypeError:
        pass
    else:
        return datetime.now(UTC) - timedelta(seconds=ago)
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a time: {text!r} (use RFC 3339 like 2030-01-01T00:00:00Z, or 24h: a day ago)"
        ) from None
    if value.tzinfo is None:
        raise argparse.ArgumentTypeError(
            f"{text!r} has no timezone: add Z for UTC, e.g. 2030-01-01T00:00:00Z"
        )
    return value
