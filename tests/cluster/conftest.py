"""A real Redis Cluster on loopback: three primaries and three replicas, started once per
session (``redis-server --cluster-enabled yes`` each in its own directory, then
``redis-cli --cluster create``) and stopped afterwards. Each test that asks for
``cluster_url`` gets it flushed on every primary.

Needs ``redis-server`` and ``redis-cli`` only; when either is missing the tests FAIL (not
skip), as the Makefile requires both.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import ExitStack

import pytest
import redis
from redis.cluster import RedisCluster

from gateway.redis_server import ManagedRedis, free_port

NODES = 6
READY_TIMEOUT = 20.0


def _cluster_ok(port: int) -> bool:
    with redis.Redis(host="127.0.0.1", port=port, socket_timeout=1.0) as client:
        try:
            info = client.execute_command("CLUSTER INFO")  # parsed into a dict
        except redis.RedisError:
            return False
    return bool(info.get("cluster_state") == "ok")


def _role(port: int) -> list[object]:
    """``ROLE`` of a node: ``["master", ...]`` or ``["slave", host, port, state, offset]``."""
    with redis.Redis(host="127.0.0.1", port=port, decode_responses=True) as client:
        try:
            return list(client.execute_command("ROLE"))
        except redis.RedisError:
            return []


def _replicas_attached(ports: list[int]) -> bool:
    """Half the nodes are replicas connected to their primary (their first sync is done)."""
    roles = [_role(port) for port in ports]
    connected = [r for r in roles if r[:1] == ["slave"] and r[3] == "connected"]
    return len(connected) == NODES // 2


def _wait_ok(ports: list[int]) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    while not (all(_cluster_ok(port) for port in ports) and _replicas_attached(ports)):
        if time.monotonic() > deadline:
            raise RuntimeError(f"the Redis Cluster on ports {ports} did not reach state ok")
        time.sleep(0.05)  # polling interval, not a wait for something to be done


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[int]]:
    """The session's Redis Cluster; yields the ports of its six nodes."""
    cli = shutil.which("redis-cli")
    if cli is None or shutil.which("redis-server") is None:
        pytest.fail("the cluster tests need redis-server and redis-cli: run 'make redis-server'")
    root = tmp_path_factory.mktemp("cluster")
    with ExitStack() as stack:
        servers: list[ManagedRedis] = []
        for i in range(NODES):
            data, port = root / f"node{i}", free_port()
            cluster_args = [
                "--cluster-enabled", "yes",
                "--cluster-config-file", str(data / f"nodes-{port}.conf"),
                # Its own free bus port: the default (port + 10000) may be taken or past 65535.
                "--cluster-port", str(free_port()),
                # Replicas sync at once, not after the default 5 s wait for more of them.
                "--repl-diskless-sync-delay", "0",
                # Nodes gossip every node-timeout / 2: 1.5 s, not 7.5 s, so the cluster agrees
                # sooner. A node still counts as failing only after 3 s without an answer.
                "--cluster-node-timeout", "3000",
            ]  # fmt: skip
            server = ManagedRedis(data, port=port, appendonly=False, extra_args=cluster_args)
            stack.enter_context(server)
            servers.append(server)
        ports = [s.port for s in servers]
        nodes = [f"127.0.0.1:{port}" for port in ports]
        subprocess.run(
            [cli, "--cluster", "create", *nodes, "--cluster-replicas", "1", "--cluster-yes"],
            check=True,
            capture_output=True,
            timeout=30,
        )
        _wait_ok(ports)
        yield ports


@pytest.fixture
def cluster_url(redis_cluster: list[int]) -> str:
    """The gateway URL of the session's cluster, every primary flushed for this test."""
    with RedisCluster(host="127.0.0.1", port=redis_cluster[0]) as client:
        client.flushall(target_nodes=RedisCluster.PRIMARIES)
    return "redis+cluster://" + ",".join(f"127.0.0.1:{p}" for p in redis_cluster[:3]) + "/"
