"""The ``Prefer`` request header (RFC 7240), as the enqueue routes read it.

``Prefer: return=minimal`` asks an enqueue to answer each task with a
:class:`~sdk.wire.TaskReceipt` (id, state, deduplicated) instead of the whole
:class:`~sdk.wire.Task`, as PostgREST and Azure's APIs do; the answer then carries
``Preference-Applied: return=minimal``. A producer that follows its tasks by id saves the
gateway writing, and itself reading, about 700 bytes per task. Any other preference, and a
header that does not parse, is ignored (RFC 7240 section 2: a server ignores what it does not
understand), so the answer is the whole Task, without ``Preference-Applied``.
"""

from __future__ import annotations

from sdk.wire import RETURN_MINIMAL

__all__ = ["RETURN_MINIMAL", "wants_minimal"]


def wants_minimal(header: str | None) -> bool:
    """Whether a ``Prefer`` header's ``return`` preference is ``minimal``.

    Preferences are separated by commas, their parameters by semicolons; names compare
    without case, values with case, a quoted value as the token it quotes. A preference given
    twice counts the first time (RFC 7240 section 2)."""
    if not header:
        return False
    for preference in header.split(","):
        name, _, value = preference.partition(";")[0].partition("=")
        if name.strip().lower() == "return":
            value = value.strip()
            if len(value) >= 2 and value[0] == value[-1] == '"':
                value = value[1:-1]
            return value == "minimal"
    return False
