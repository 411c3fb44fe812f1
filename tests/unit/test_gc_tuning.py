"""The gateway's process entry points set the cyclic collector's threshold from the settings;
nothing else changes it (a gateway inside another program leaves its collector alone)."""

from __future__ import annotations

import gc
from collections.abc import Coroutine, Iterator
from typing import Any

import pytest

from gateway.serving import gc_tuning, server
from gateway.settings import Settings


@pytest.fixture(autouse=True)
def restored_gc() -> Iterator[None]:
    before = gc.get_threshold()
    yield
    gc.set_threshold(*before)
    gc.unfreeze()


def test_tune_sets_the_youngest_generation_only() -> None:
    gc.set_threshold(700, 10, 10)
    gc_tuning.tune(20_000)
    assert gc.get_threshold() == (20_000, 10, 10)


def test_zero_keeps_pythons_threshold() -> None:
    gc.set_threshold(700, 10, 10)
    gc_tuning.tune(0)
    assert gc.get_threshold() == (700, 10, 10)


def test_freeze_startup_takes_live_objects_out_of_collections() -> None:
    gc.unfreeze()
    kept = [object() for _ in range(10)]
    gc_tuning.freeze_startup()
    assert gc.get_freeze_count() > 0
    del kept


def test_serve_applies_the_setting_and_freezes_once_started(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gc.set_threshold(700, 10, 10)
    gc.unfreeze()
    started: list[Coroutine[Any, Any, None]] = []
    monkeypatch.setattr(server, "run", started.append)
    monkeypatch.setattr(server, "configure_logging", lambda level: None)

    server.serve(Settings(gc_threshold=12_345))

    assert gc.get_threshold()[0] == 12_345
    (main,) = started
    on_ready = main.cr_frame.f_locals["on_ready"]
    main.close()
    assert gc.get_freeze_count() == 0
    on_ready(server.Listening("http://127.0.0.1:1", None))
    assert gc.get_freeze_count() > 0
