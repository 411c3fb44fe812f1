"""A push's payload read as a task function's arguments, without the model when it is plain.

A payload is ``{"args": [...], "kwargs": {...}}`` (:class:`~sdk.wire.TaskArgs`, which may add
``results_as`` for a chain's link or a chord's callback). Most carry only scalars: for those
:func:`plain_call` takes the arguments as they are, skipping the model's validation, and the
runner (:mod:`sdk.runner`) has the model read only the others.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["plain_call"]

_CALL_FIELDS = frozenset({"args", "kwargs"})
_SCALARS = frozenset({type(None), bool, int, str})


def plain(value: object) -> bool:
    return type(value) in _SCALARS or (type(value) is float and math.isfinite(value))


def plain_call(payload: object) -> tuple[list[Any], dict[str, Any]] | None:
    """The arguments a payload asks for, taken without validating it when it is plainly valid
    (no payload; or ``args`` and ``kwargs`` alone, a list and an object of nulls, booleans,
    finite numbers and strings): what :class:`TaskArgs` would make of it, with no
    ``results_as``. None for any other payload, which the model then reads (and may refuse)."""
    if payload is None:
        return [], {}
    if type(payload) is not dict or not _CALL_FIELDS.issuperset(payload):
        return None
    args = payload.get("args", [])
    kwargs = payload.get("kwargs", {})
    if type(args) is not list or type(kwargs) is not dict:
        return None
    if not all(plain(v) for v in args) or not all(plain(v) for v in kwargs.values()):
        return None
    return args, kwargs
