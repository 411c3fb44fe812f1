"""Command line of ``bench/peers.py``: what to run, how big, how often."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass

SYSTEMS = ("jobgate", "dramatiq", "taskiq", "celery")
RACES = ("python", "http")  # (a) Python functions, (b) the user's HTTP service
QUICK_TASKS = 2_000


@dataclass(frozen=True)
class Options:
    tasks: int
    repeat: int
    processes: tuple[int, ...]
    rate: float
    seconds: float
    in_flight: int
    systems: tuple[str, ...]
    races: tuple[str, ...] = RACES

    @property
    def warmup(self) -> int:
        """Tasks drained before measuring, so imports, connections and caches are warm."""
        return max(1, min(500, self.tasks // 10))

    @property
    def latency_samples(self) -> int:
        return max(1, round(self.rate * self.seconds))


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:  # also refuses nan
        raise argparse.ArgumentTypeError(f"must be above 0, not {text}")
    return value


def parse_processes(text: str) -> tuple[int, ...]:
    """``"1,2,4"`` → ``(1, 2, 4)``: process counts, each at least 1, no repeats, in order."""
    counts = tuple(_positive_int(part.strip()) for part in text.split(","))
    if len(set(counts)) != len(counts):
        raise argparse.ArgumentTypeError(f"a process count is repeated in {text!r}")
    return counts


def parse_systems(text: str) -> tuple[str, ...]:
    names = tuple(part.strip().lower() for part in text.split(","))
    unknown = [name for name in names if name not in SYSTEMS]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown system {', '.join(unknown)}; choose from {', '.join(SYSTEMS)}"
        )
    return names


def parse_races(text: str) -> tuple[str, ...]:
    names = tuple(part.strip().lower() for part in text.split(","))
    unknown = [name for name in names if name not in RACES]
    if unknown or len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(
            f"bad races {text!r}; a comma-separated subset of {', '.join(RACES)}"
        )
    return names


def parser() -> argparse.ArgumentParser:
    made = argparse.ArgumentParser(
        prog="bench/peers.py",
        description=(
            "Jobgate side by side with Dramatiq, taskiq (Redis stream broker) and Celery on one "
            "managed Redis, back to back in each run, in two races: Python functions (a no-op "
            "task) and the user's HTTP service (each task one POST to the same service); prints "
            "each metric's medians, Jobgate ÷ best peer ratios and issue 20's targets as "
            "Markdown."
        ),
    )
    made.add_argument(
        "--tasks", type=_positive_int, default=10_000, help="tasks per drain (default 10000)"
    )
    made.add_argument("--repeat", type=_positive_int, default=3, help="runs (default 3)")
    made.add_argument(
        "--processes",
        type=parse_processes,
        default=(1, 2),
        help=(
            "comma-separated process counts for the drain (default 1,2): N gateway processes "
            "and an N-process SDK worker; N worker processes for each peer. Latency, enqueue "
            "and CPU figures are taken at the first count."
        ),
    )
    made.add_argument(
        "--rate",
        type=_positive_float,
        default=200.0,
        help="arrivals per second for the idle latency (default 200)",
    )
    made.add_argument(
        "--seconds",
        type=_positive_float,
        default=5.0,
        help="how long tasks arrive at --rate (default 5)",
    )
    made.add_argument(
        "--in-flight",
        type=_positive_int,
        default=64,
        help="concurrent single-task enqueues (default 64)",
    )
    made.add_argument(
        "--systems",
        type=parse_systems,
        default=SYSTEMS,
        help=f"comma-separated subset of {','.join(SYSTEMS)} (default all)",
    )
    made.add_argument(
        "--races",
        type=parse_races,
        default=RACES,
        help=(
            "comma-separated subset of python (no-op Python functions) and http (each task "
            "one POST to the user's HTTP service) (default both)"
        ),
    )
    made.add_argument(
        "--quick",
        action="store_true",
        help=f"smoke run: {QUICK_TASKS} tasks, one run, 2 s of latency samples",
    )
    return made


def parse(argv: Sequence[str] | None = None) -> Options:
    args = parser().parse_args(argv)
    tasks, repeat, seconds = args.tasks, args.repeat, args.seconds
    if args.quick:
        tasks, repeat, seconds = QUICK_TASKS, 1, 2.0
    return Options(
        tasks=tasks,
        repeat=repeat,
        processes=args.processes,
        rate=args.rate,
        seconds=seconds,
        in_flight=args.in_flight,
        systems=args.systems,
        races=args.races,
    )
