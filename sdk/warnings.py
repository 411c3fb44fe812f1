"""A task that succeeded with a warning: ``return Warn("3 rows skipped", result=...)``.

The task counts as succeeded (no retry) and its result is ``result``; the warning's text goes
with it to the gateway (a job's run then shows the status ``warning`` with this message).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MAX_WARNING = 8192


@dataclass(frozen=True, slots=True)
class Warn:
    """Returned by a task function: succeeded, with a warning (cut to 8,192 characters)."""

    message: str
    result: Any = None
