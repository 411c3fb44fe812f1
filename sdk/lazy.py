"""A module loaded on first use, for the modules a producer's ``from sdk import Client, task``
reaches: the request specs (:mod:`sdk.api`), the wire models (:mod:`sdk.wire`, and so pydantic)
and asyncio are needed once a client sends or a worker runs, not by the import.

::

    if TYPE_CHECKING:
        from sdk import api
    else:
        api = lazy.module("sdk.api")

Every attribute read goes to ``sys.modules`` (``importlib.import_module`` the first time, which
holds the import lock, so threads that race to the first use all get the whole module; a test's
``monkeypatch`` of the real module is seen). tests/sdk/test_sdk_import_weight.py checks what the
import loads.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

__all__ = ["module"]


class LazyModule:
    """Stands for the module ``name`` and reads its attributes, importing it on the first."""

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        loaded = sys.modules.get(self._name)
        if loaded is None or getattr(loaded.__spec__, "_initializing", False):
            loaded = importlib.import_module(self._name)
        return getattr(loaded, attr)

    def __repr__(self) -> str:
        return f"<lazy module {self._name!r}>"


def module(name: str) -> Any:
    """A stand-in for the module ``name``, imported when one of its attributes is first read."""
    return LazyModule(name)
