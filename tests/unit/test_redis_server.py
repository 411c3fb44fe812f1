"""The managed ``redis-server`` used by ``jobgate dev`` and by the test suite."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from gateway.serving import redis_server as redis_server_module
from gateway.serving.redis_server import (
    ManagedRedis,
    RedisServerNotFound,
    RedisServerStartError,
    find_redis_server,
    free_port,
)


def _client(server: ManagedRedis) -> redis.Redis:
    return redis.Redis.from_url(server.url, decode_responses=True)


@pytest.fixture
def listening_socket() -> Iterator[socket.socket]:
    """A socket that holds a loopback port without speaking Redis."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock


@pytest.mark.parametrize("appendonly", [True, False])
def test_server_runs_with_jobgate_settings(tmp_path: Path, appendonly: bool) -> None:
    with ManagedRedis(tmp_path, appendonly=appendonly) as server, _client(server) as client:
        assert client.ping() is True
        config = client.config_get("*")
        assert config["maxmemory-policy"] == "noeviction"
        assert config["appendonly"] == ("yes" if appendonly else "no")
        assert config["appendfsync"] == "everysec"
        assert config["save"] == ""
        assert config["bind"] == "127.0.0.1"
        assert config["protected-mode"] == "yes"
        assert config["dir"] == str(tmp_path.resolve())
        assert int(config["port"]) == server.port
    assert (tmp_path / "redis.log").stat().st_size > 0


def test_url_points_at_db_0_on_loopback(tmp_path: Path) -> None:
    server = ManagedRedis(tmp_path, port=6390)
    assert server.url == "redis://127.0.0.1:6390/0"


def test_extra_args_override_defaults(tmp_path: Path) -> None:
    server = ManagedRedis(tmp_path, extra_args=["--maxmemory-policy", "allkeys-lru"])
    with server, _client(server) as client:
        assert client.config_get("maxmemory-policy") == {"maxmemory-policy": "allkeys-lru"}


def test_appendonly_data_survives_restart(tmp_path: Path) -> None:
    with ManagedRedis(tmp_path, appendonly=True) as first, _client(first) as client:
        client.set("job:1", "queued")
        client.hset("task:1", mapping={"state": "running", "attempt": "2"})

    with ManagedRedis(tmp_path, appendonly=True) as second, _client(second) as client:
        assert client.get("job:1") == "queued"
        assert client.hgetall("task:1") == {"state": "running", "attempt": "2"}


def test_without_appendonly_nothing_survives_restart(tmp_path: Path) -> None:
    # Also checks that `--save ""` holds: SHUTDOWN would otherwise write an RDB.
    with ManagedRedis(tmp_path, appendonly=False) as first, _client(first) as client:
        client.set("job:1", "queued")

    with ManagedRedis(tmp_path, appendonly=False) as second, _client(second) as client:
        assert client.dbsize() == 0
    assert not (tmp_path / "dump.rdb").exists()


def test_same_instance_restarts_on_its_port(tmp_path: Path) -> None:
    server = ManagedRedis(tmp_path)
    with server, _client(server) as client:
        client.set("k", "v")
    port = server.port
    with server, _client(server) as client:
        assert server.port == port
        assert client.get("k") == "v"


def test_stop_leaves_no_child_process(tmp_path: Path) -> None:
    server = ManagedRedis(tmp_path, appendonly=False)
    server.start()
    process = server.process
    assert process is not None
    assert process.poll() is None
    assert server.running

    server.stop()

    assert process.poll() is not None
    assert not server.running
    with _client(server) as client, pytest.raises(redis.ConnectionError):
        client.ping()


def test_stop_uses_shutdown_not_the_fallback(tmp_path: Path) -> None:
    server = ManagedRedis(tmp_path, appendonly=False)
    server.start()
    started = time.monotonic()
    server.stop(timeout=30)
    # The SIGTERM fallback would only run after waiting the whole timeout.
    assert time.monotonic() - started < 5


def test_stop_falls_back_to_sigterm_when_shutdown_is_refused(tmp_path: Path) -> None:
    server = ManagedRedis(
        tmp_path, appendonly=False, extra_args=["--rename-command", "SHUTDOWN", ""]
    )
    server.start()
    process = server.process
    assert process is not None
    started = time.monotonic()
    server.stop(timeout=30)
    assert process.poll() is not None
    assert time.monotonic() - started < 5


def test_stop_is_idempotent(tmp_path: Path) -> None:
    server = ManagedRedis(tmp_path, appendonly=False)
    server.stop()  # never started
    server.start()
    server.stop()
    server.stop()
    assert not server.running


def test_start_twice_is_refused(tmp_path: Path) -> None:
    with ManagedRedis(tmp_path, appendonly=False) as server, pytest.raises(RuntimeError):
        server.start()


def test_find_redis_server_returns_an_executable() -> None:
    assert Path(find_redis_server()).name == "redis-server"


def test_find_redis_server_without_one_on_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(RedisServerNotFound, match="install"):
        find_redis_server()
    with pytest.raises(RedisServerNotFound):
        ManagedRedis(tmp_path / "data").start()


def test_port_in_use_fails_with_the_log_tail(
    tmp_path: Path, listening_socket: socket.socket
) -> None:
    port = listening_socket.getsockname()[1]
    server = ManagedRedis(tmp_path, port=port, appendonly=False)
    with pytest.raises(RedisServerStartError, match="Address already in use"):
        server.start()
    assert server.process is not None
    assert server.process.poll() is not None


def test_port_held_by_another_redis_is_not_mistaken_for_ours(tmp_path: Path) -> None:
    with ManagedRedis(tmp_path / "a", appendonly=False) as other:
        server = ManagedRedis(tmp_path / "b", port=other.port, appendonly=False)
        with pytest.raises(RedisServerStartError):
            server.start()
        with _client(other) as client:
            assert client.ping() is True


def test_picked_port_taken_meanwhile_retries_another(
    tmp_path: Path, listening_socket: socket.socket, monkeypatch: pytest.MonkeyPatch
) -> None:
    taken = listening_socket.getsockname()[1]
    ports = iter([taken, free_port()])
    monkeypatch.setattr(redis_server_module, "free_port", lambda: next(ports))

    with ManagedRedis(tmp_path, appendonly=False) as server, _client(server) as client:
        assert server.port != taken
        assert client.ping() is True


def test_appendfsync_is_checked(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="appendfsync"):
        ManagedRedis(tmp_path, appendfsync="sometimes")


def test_redis_url_fixture_gives_an_empty_redis(
    redis_server: ManagedRedis, request: pytest.FixtureRequest
) -> None:
    with (
        redis.Redis("127.0.0.1", redis_server.port, db=0) as db0,
        redis.Redis("127.0.0.1", redis_server.port, db=1) as db1,
    ):
        db0.set("left-over", "1")
        db1.set("left-over-in-db-1", "1")
        assert set(db0.info("keyspace")) == {"db0", "db1"}

    url: str = request.getfixturevalue("redis_url")

    assert url == redis_server.url
    with redis.Redis.from_url(url) as client:
        assert client.info("keyspace") == {}
