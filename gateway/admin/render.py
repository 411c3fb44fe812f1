"""Jinja2 for the admin UI: the environment, its filters, and the one CSRF helper forms use.

Templates live in ``templates/``: ``base.html`` is the layout, one template per page, and each
part that refreshes live is a ``_name.html`` partial the page includes (so a page renders
whole without JavaScript) and htmx fetches alone. Autoescaping is on for everything.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from jinja2 import Environment, FileSystemLoader, StrictUndefined, pass_context
from jinja2.runtime import Context
from markupsafe import Markup

from sdk.schedules import schedule_text

TEMPLATES = Path(__file__).parent / "templates"
CSRF_FIELD = "csrf"
OUTCOME_BADGES = {
    "succeeded": "succeeded",
    "running": "running",
    "error": "failed",
    "failed": "failed",
    "expired": "failed",
    "stalled": "failed",
    "cancelled": "cancelled",
    # A wait's end (the timeline): an event matched, a timeout, a child the gateway refused.
    "matched": "succeeded",
    "timed out": "warning",
    "refused": "failed",
}
RUN_BADGES = {
    "pending": "queued",
    "running": "running",
    "success": "succeeded",
    "warning": "warning",
    "failure": "failed",
    "stopped": "cancelled",
}
"""The badge colour of a run's status."""
"""The badge colour of an attempt's outcome (busy, gone and released ones stay grey)."""
NOTHING = "-"


def duration(seconds: float | None) -> str:
    """A short human duration: ``850 ms``, ``12.3 s``, ``4 min 05 s``, ``2 h 03 min``."""
    if seconds is None:
        return NOTHING
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes:02d} min"
    return f"{hours // 24} d {hours % 24} h"


def when(moment: datetime | None) -> str:
    """A time in UTC, to the second."""
    if moment is None:
        return NOTHING
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def at(moment: datetime | None) -> Markup:
    """A time as a ``<time>`` element: UTC in the page, turned into the viewer's local time by
    ``admin.js``, which keeps UTC on hover (the title)."""
    if moment is None:
        return Markup(NOTHING)
    utc = when(moment)
    return Markup('<time datetime="{}" title="{}">{}</time>').format(
        moment.astimezone(UTC).isoformat(), utc, utc
    )


def ago(moment: datetime | None, now: datetime | None = None) -> str:
    """How long ago (or, for a future time, in how long)."""
    if moment is None:
        return NOTHING
    delta = ((now or datetime.now(UTC)) - moment).total_seconds()
    return f"{duration(delta)} ago" if delta >= 0 else f"in {duration(-delta)}"


def thousands(n: int | float | None) -> str:
    """A count with thousands separators: ``12,345``."""
    if n is None:
        return NOTHING
    return f"{n:,}" if isinstance(n, int) else f"{n:,.1f}"


def plural(n: int, word: str, many: str | None = None) -> str:
    """A count and its noun, agreeing: ``1 endpoint``, ``2 endpoints``, ``12,345 tasks``
    (``many``: the plural when it is not ``word`` + s). Every count in words goes through it,
    never ``endpoint(s)``."""
    return f"{thousands(n)} {word if n == 1 else many or word + 's'}"


class Count(int):
    """A count for ``str.format`` that names its noun: ``"{n:task}"`` is ``3 tasks``."""

    def __format__(self, spec: str) -> str:
        return plural(int(self), spec) if spec else thousands(int(self))


def zoned(moment: datetime | None, zone: str | None = None) -> Markup:
    """A time in a given IANA zone (a job's), with the zone's abbreviation, and UTC on hover.
    Not a ``<time>``: ``admin.js`` turns those into the viewer's zone, and this one means the
    job's."""
    if moment is None:
        return Markup(NOTHING)
    local = moment.astimezone(ZoneInfo(zone or "UTC"))
    return Markup('<span class="zoned" title="{}">{}</span>').format(
        when(moment), local.strftime("%Y-%m-%d %H:%M:%S %Z")
    )


def pretty(value: Any) -> str:
    """JSON, indented, for a ``<pre>``."""
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False)


@pass_context
def csrf_field(context: Context) -> Markup:
    """The hidden input every POST form carries (``{{ csrf_field() }}``)."""
    return Markup('<input type="hidden" name="{}" value="{}">').format(CSRF_FIELD, context["csrf"])


def environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        duration=duration,
        when=when,
        ago=ago,
        pretty=pretty,
        schedule=schedule_text,
        thousands=thousands,
        at=at,
        plural=plural,
        zoned=zoned,
    )
    env.globals.update(csrf_field=csrf_field, OUTCOME_BADGES=OUTCOME_BADGES, RUN_BADGES=RUN_BADGES)
    return env
