"""The key of a task under its queue's per-key rate limit (``QueuePolicy.key_rate_limit``).

Read once, when the task is enqueued, and kept on the task record (``rk``), so the claim script
never decodes a payload: the claim only looks the key's token bucket up.
"""

from __future__ import annotations

import hashlib

from pydantic import JsonValue

MAX_KEY_LENGTH = 128


def rate_key_of(payload: JsonValue, path: str) -> str | None:
    """The value at ``path`` (dot-separated; a segment of digits indexes a list) as a bucket
    name, or None when the payload has no string, integer or boolean there. Integers and their
    decimal strings share a bucket (``7`` and ``"7"`` are one customer). A value longer than
    128 characters is replaced by its SHA-1 hex, so a bucket name stays small whatever the
    payload holds."""
    value = payload
    for segment in path.split("."):
        if isinstance(value, dict):
            value = value.get(segment)
        elif isinstance(value, list) and segment.isdigit() and int(segment) < len(value):
            value = value[int(segment)]
        else:
            return None
    if isinstance(value, bool):
        key = "true" if value else "false"
    elif isinstance(value, int | str):
        key = str(value)
    else:
        return None
    if len(key) > MAX_KEY_LENGTH:
        return hashlib.sha1(key.encode(), usedforsecurity=False).hexdigest()
    return key
