"""What both SDK transports answer with: the parts of an HTTP answer the SDK reads, and the
pool size they share. No HTTP library is imported here, so the blocking client (``http.client``)
does not load aiohttp's (sdk/sessions.py) to name them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

__all__ = ["POOL_SIZE", "Answer", "Params", "Reply"]

Params = Mapping[str, str | int | float]

POOL_SIZE = 100
"""Most connections one session keeps open at once (httpx's default, which it replaces)."""


class Answer(Protocol):
    """What the SDK reads of an HTTP answer; an ``httpx.Response`` is one too."""

    @property
    def status_code(self) -> int: ...

    @property
    def reason_phrase(self) -> str: ...

    @property
    def content(self) -> bytes: ...

    @property
    def text(self) -> str: ...

    @property
    def is_success(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class Reply:
    """An answer read whole from aiohttp."""

    status_code: int
    reason_phrase: str
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")

    @property
    def is_success(self) -> bool:
        return 200 <= self.status_code < 300
