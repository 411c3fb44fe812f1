"""CPU time of benchmark processes, read from ``/proc`` (Linux only).

A process's own ``utime + stime`` (fields 14 and 15 of ``/proc/<pid>/stat``) counts only its
own threads, so the CPU of a server that forks or spawns workers (uvicorn ``--workers``,
Dramatiq's and taskiq's worker CLIs) is summed over the live process tree. psutil would do the
same, but it is not a dependency and two fields of one file do not need it.
"""

from __future__ import annotations

import os
from pathlib import Path

_PROC = Path("/proc")


def _stat_fields(pid: int) -> list[str]:
    """Fields after the command name (which may itself hold spaces and parentheses)."""
    return (_PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()


def cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds of one process's threads so far."""
    fields = _stat_fields(pid)
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (children, grandchildren, ...)."""
    children: dict[int, list[int]] = {}
    for entry in _PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int(_stat_fields(int(entry.name))[1])
        except (OSError, IndexError, ValueError):
            continue  # exited while we looked
        children.setdefault(parent, []).append(int(entry.name))
    found: list[int] = []
    todo = [pid]
    while todo:
        below = children.get(todo.pop(), [])
        found += below
        todo += below
    return found


def tree_cpu_seconds(pid: int) -> float:
    """CPU seconds of ``pid`` and its live descendants (those that exited are not counted)."""
    total = 0.0
    for member in [pid, *descendants(pid)]:
        try:
            total += cpu_seconds(member)
        except OSError:
            continue
    return total
