"""The timezone names a crontab schedule accepts, and the pattern ``openapi.yaml`` states them by.

The list is fixed (``timezones.txt``, sorted): every zone of the IANA tz database as the
``tzdata`` package lists them. It is not read from the machine (``zoneinfo.available_timezones()``
also holds names such as ``localtime`` and changes with the system's tz data), so the schema
and what the gateway accepts are the same everywhere. ``tzdata`` is a dependency, so each name
loads even where the system has no tz data (slim containers, Windows). A zone added to the
database later is accepted once the list is regenerated from a newer ``tzdata``.

The schema says it with a ``pattern`` that admits exactly these names rather than an ``enum``:
generated clients then keep the timezone a string (an enum class of 598 members breaks
openapi-python-client on ``GMT+0``/``GMT-0``/``GMT0``, and would refuse to read a job whose zone
a newer gateway added), and a contract tester does not send one request per name.
"""

from __future__ import annotations

import functools
import itertools
from pathlib import Path
from typing import Any

_LIST = Path(__file__).with_name("timezones.txt")


@functools.cache
def timezones() -> tuple[str, ...]:
    """Every accepted name, sorted."""
    lines = _LIST.read_text(encoding="utf-8").splitlines()
    return tuple(line for line in lines if line and not line.startswith("#"))


@functools.cache
def _names() -> frozenset[str]:
    return frozenset(timezones())


def _alternatives(names: list[str]) -> str:
    # Names hold letters, digits, '/', '_', '-' and '+'; only '+' is special in a regex ('-' is
    # literal outside a class, and escaping it is an error in ECMA-262's unicode mode).
    return "|".join(name.replace("+", r"\+") for name in names)


@functools.cache
def timezone_pattern() -> str:
    """A regex (ECMA-262 and Python alike) that matches exactly the accepted names, grouped by
    area to stay short: ``^(Africa/(Abidjan|Accra|...)|...|UTC|...)$``."""
    parts = []
    for area, zones in itertools.groupby(timezones(), key=lambda name: name.partition("/")[0]):
        rests = [name.partition("/")[2] for name in zones]
        if rests == [""]:
            parts.append(_alternatives([area]))
        elif "" in rests:  # an area that is also a zone of its own
            parts.append(_alternatives([area]) + "(/(" + _alternatives(rests[1:]) + "))?")
        else:
            parts.append(_alternatives([area]) + "/(" + _alternatives(rests) + ")")
    return "^(" + "|".join(parts) + ")$"


def add_pattern(schema: dict[str, Any]) -> None:
    """Complete the JSON Schema of a timezone name with :func:`timezone_pattern`."""
    schema["pattern"] = timezone_pattern()


def check_timezone(name: str) -> str:
    """``name`` when it is an accepted timezone name, else ValueError."""
    if name not in _names():
        raise ValueError("must be an IANA timezone name, e.g. 'Europe/Berlin' or 'UTC'")
    return name
