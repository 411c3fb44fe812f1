"""Task ids: ULIDs made a batch at a time.

A ULID is 48 bits of milliseconds and 80 random bits, written as 26 Crockford base32
characters. python-ulid makes one per call (about 4 µs: a lock, a bytes object, an int
round trip and its own base32 loop); a batch enqueue of 1,000 tasks spent a tenth of the
gateway's CPU on them. :class:`IdMaker` makes ``count`` at once by the same rules as
python-ulid's default generator: ids of the same millisecond count up from the last one, so ids
of one process sort in the order they were made; a new millisecond starts at a random value
(and where python-ulid raises, a millisecond with no room left for ``count`` more, the next
millisecond is taken).
Counting up changes the last two characters (the low 10 bits) of all but one id in 1,024: each
block of 1,024 shares its first 24 characters, written once, and each id is that prefix and
one of the 1,024 two-character endings.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Callable

_RANDOM_BITS = 80
_MAX_RANDOM = (1 << _RANDOM_BITS) - 1
_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"  # Crockford's base32
_PAIRS = [a + b for a in _ALPHABET for b in _ALPHABET]  # 10 bits as two characters
_BLOCK = len(_PAIRS)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def encode(value: int) -> str:
    """A 128-bit ULID as its 26 characters: 13 groups of 10 bits, the top 2 bits zero."""
    return "".join([_PAIRS[(value >> shift) & 1023] for shift in range(120, -1, -10)])


class IdMaker:
    """Monotonic ULIDs, many at a time; safe to share between threads (a lock per call, not
    per id)."""

    def __init__(
        self,
        clock: Callable[[], int] = _now_ms,
        randomness: Callable[[int], bytes] = os.urandom,
    ) -> None:
        self._clock = clock
        self._randomness = randomness
        self._lock = threading.Lock()
        self._ms = -1
        self._last = 0  # the random part of the last id made in millisecond _ms

    def take(self, count: int) -> list[str]:
        """``count`` new ids, in increasing order."""
        with self._lock:
            ms, start = self._reserve(count)
        high = ms << _RANDOM_BITS
        made: list[str] = []
        at, end = start, start + count
        while at < end:
            block = at - at % _BLOCK
            prefix = encode(high | block)[:-2]
            stop = min(end, block + _BLOCK)
            made += [prefix + ending for ending in _PAIRS[at - block : stop - block]]
            at = stop
        return made

    def _reserve(self, count: int) -> tuple[int, int]:
        """The millisecond and the first random part of ``count`` ids not made before."""
        ms = self._clock()
        if ms == self._ms and self._last + count <= _MAX_RANDOM:
            start = self._last + 1
        else:  # a new millisecond: start anew (with no room left in this one, in the next)
            if ms == self._ms:
                ms += 1
            start = int.from_bytes(self._randomness(_RANDOM_BITS // 8), "big")
            start = min(start, _MAX_RANDOM - count + 1)
        self._ms, self._last = ms, start + count - 1
        return ms, start

    def one(self) -> str:
        (made,) = self.take(1)
        return made


def derived_id(ms: int, *parts: str) -> str:
    """A ULID made from what it stands for, the same wherever and however often it is made:
    its 48-bit time is ``ms``, its 80 random bits the first 80 bits of the SHA-256 of
    ``parts`` joined by newlines (an event's trigger task: the event's accepted ms, the event
    id and the trigger id; :mod:`gateway.services.trigger_starts`)."""
    digest = hashlib.sha256("\n".join(parts).encode()).digest()
    return encode((ms << _RANDOM_BITS) | int.from_bytes(digest[: _RANDOM_BITS // 8], "big"))


def ulid_ms(ulid: str) -> int:
    """The milliseconds of a ULID (its first 10 characters); 0 for what is not one."""
    try:
        return sum(_ALPHABET.index(c) << (5 * (9 - i)) for i, c in enumerate(ulid[:10].upper()))
    except ValueError:
        return 0
