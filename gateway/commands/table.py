"""Aligned plain-text tables, and the cell formats the operator commands share.

::

    QUEUE   PAUSED  QUEUED  RUNNING
    emails  no          12        3
    images  yes          0        0

Columns are separated by two spaces, numbers are right-aligned, an empty cell shows ``-``.
Times are RFC 3339 in UTC to the second, so a cell can be pasted into ``--since``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

EMPTY = "-"
GAP = "  "


@dataclass(frozen=True)
class Column:
    title: str
    numeric: bool = False  # right-aligned


def render(columns: Sequence[Column], rows: Iterable[Sequence[str | None]]) -> str:
    """The table as lines of text (with a final newline); ``None`` cells show as ``-``."""
    cells = [[EMPTY if cell is None or cell == "" else cell for cell in row] for row in rows]
    for row in cells:
        if len(row) != len(columns):
            raise ValueError(f"a row has {len(row)} cells for {len(columns)} columns")
    widths = [len(c.title) for c in columns]
    for row in cells:
        widths = [max(width, len(cell)) for width, cell in zip(widths, row, strict=True)]
    lines = []
    for row in [[c.title for c in columns], *cells]:
        padded = (
            cell.rjust(width) if column.numeric else cell.ljust(width)
            for column, cell, width in zip(columns, row, widths, strict=True)
        )
        lines.append(GAP.join(padded).rstrip())
    return "\n".join(lines) + "\n"


def moment(value: datetime | None) -> str | None:
    """``2030-01-01T12:00:05Z``: UTC, to the second."""
    if value is None:
        return None
    return value.astimezone(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def span(seconds: float | None) -> str | None:
    """A duration as a person reads it: ``0.4s``, ``12s``, ``3m05s``, ``1h``, ``2d03h``."""
    if seconds is None:
        return None
    if seconds < 10:
        return f"{max(seconds, 0.0):.1f}s"
    whole = int(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return _two(whole // 60, "m", whole % 60, "s")
    if whole < 86_400:
        return _two(whole // 3600, "h", whole % 3600 // 60, "m")
    return _two(whole // 86_400, "d", whole % 86_400 // 3600, "h")


def _two(big: int, big_unit: str, small: int, small_unit: str) -> str:
    """``3m05s``; ``3m`` when the smaller unit is zero."""
    return f"{big}{big_unit}{small:02d}{small_unit}" if small else f"{big}{big_unit}"


def percent(fraction: float | None) -> str | None:
    return None if fraction is None else f"{fraction * 100:.0f}%"


def yes_no(flag: bool) -> str:
    return "yes" if flag else "no"


def clip(text: str | None, width: int = 60) -> str | None:
    """The first line of ``text``, at most ``width`` characters; ``...`` marks a cut."""
    lines = (text or "").strip().splitlines()
    if not lines:
        return None
    line = lines[0]
    if len(lines) == 1 and len(line) <= width:
        return line
    return line[: width - 3].rstrip() + "..."
