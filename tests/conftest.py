"""Fixtures shared by every test folder, and how the suite is split between pytest-xdist
workers.

Redis: one real ``redis-server`` per test session -- under pytest-xdist, per worker: each worker
is its own session, with its own temporary directory -- started on a port of
:func:`tests.support.free_port` in a temporary directory (see ``gateway.serving.redis_server``), and
flushed before each test that asks for ``redis_url``, so every test starts from an empty Redis.

Workers (``make test`` runs ``pytest -n N``): tests are dealt out one by one, except the folders
in :data:`GROUPS`, whose tests all go to one worker (:func:`pytest_xdist_make_scheduler`):
tests/cluster/ shares one six-node Redis Cluster per session (one per worker would start
three), and tests/browser/ runs headless Chromium (two at once would crowd two cores).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from gateway.serving.redis_server import ManagedRedis
from tests.support import free_port

# Folder under tests/ -> the group whose tests all run in one xdist worker.
GROUPS = {"cluster": "cluster", "browser": "browser"}
# The folders whose tests start processes (gateways, workers, Redis nodes, Chromium), and their
# timeout. pyproject.toml's 60 s is a hang guard for the rest; on two loaded cores, starting
# three Python processes can take a minute by itself. A test's own timeout mark wins.
PROCESS_FOLDERS = {"e2e", "cluster", "browser"}
PROCESS_TIMEOUT = 180.0
TESTS = Path(__file__).parent


def _folder(path: Path) -> str:
    """The folder under tests/ that ``path`` is in ("" outside tests/)."""
    return path.relative_to(TESTS).parts[0] if path.is_relative_to(TESTS) else ""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _folder(item.path) in PROCESS_FOLDERS and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(PROCESS_TIMEOUT))


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook: absent without xdist
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``-n N`` (``--dist load``, the default) and ``--dist loadgroup``: tests are dealt out one
    by one, but each of :data:`GROUPS` goes to one worker whole. (Grouping by ``xdist_group``
    marks alone does not work with pytest 9: xdist renames the items through an attribute
    pytest no longer reads, so the controller never sees the groups.)"""
    if config.getvalue("dist") not in ("load", "loadgroup"):
        return None  # another --dist: xdist's own
    from xdist.scheduler import LoadGroupScheduling

    class FolderGroups(LoadGroupScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            parts = nodeid.split("/")
            if len(parts) > 2 and parts[0] == "tests" and parts[1] in GROUPS:
                return GROUPS[parts[1]]
            return str(super()._split_scope(nodeid))

    return FolderGroups(config, log)


# --- Redis -------------------------------------------------------------------


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ManagedRedis]:
    """The session's ``redis-server``; no append-only file, tests need no durability."""
    data = tmp_path_factory.mktemp("redis")
    with ManagedRedis(data, port=free_port(), appendonly=False) as server:
        yield server


@pytest.fixture
def redis_url(redis_server: ManagedRedis) -> str:
    """URL of the session's Redis, emptied for this test."""
    with redis.Redis.from_url(redis_server.url) as client:
        client.flushall()
    return redis_server.url
