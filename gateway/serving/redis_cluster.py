"""A local Redis Cluster for tests and benchmarks: ``redis-server --cluster-enabled yes``
processes (:class:`~gateway.serving.redis_server.ManagedRedis`), joined by ``redis-cli --cluster
create``, each in its own directory under ``root``, on loopback::

    with ManagedCluster(root, primaries=3, replicas=1) as cluster:
        cluster.url    # redis+cluster://127.0.0.1:<p1>,... for JOBGATE_REDIS_URL

Needs ``redis-server`` and ``redis-cli`` (``make redis-server`` installs both).
"""

from __future__ import annotations

import shutil
import subprocess
import time
from contextlib import ExitStack
from pathlib import Path
from types import TracebackType

import redis

from gateway.serving.redis_server import ManagedRedis, free_port

READY_TIMEOUT = 20.0


class ManagedCluster:
    """``primaries`` primaries with ``replicas`` replicas each, started on ``__enter__`` and
    stopped on ``__exit__``; ready once every node says ``cluster_state:ok`` and every replica
    finished its first sync.

    ``node_timeout_ms`` is ``cluster-node-timeout``: a node that does not answer for that long
    is suspected, and once most primaries agree it is failing its replica is promoted (about
    that long plus a second in all). ``servers`` are the nodes' processes, in ``ports`` order.
    """

    def __init__(
        self, root: Path, *, primaries: int = 3, replicas: int = 1, node_timeout_ms: int = 3000
    ) -> None:
        self._root = root
        self._primaries = primaries
        self._replicas = replicas
        self._node_timeout_ms = node_timeout_ms
        self._stack = ExitStack()
        self.servers: list[ManagedRedis] = []

    @property
    def ports(self) -> list[int]:
        return [s.port for s in self.servers]

    @property
    def url(self) -> str:
        """A gateway's ``redis+cluster://`` URL naming the first nodes."""
        return "redis+cluster://" + ",".join(f"127.0.0.1:{p}" for p in self.ports[:3]) + "/"

    def node(self, port: int) -> ManagedRedis:
        """The node listening on ``port``."""
        return next(server for server in self.servers if server.port == port)

    def __enter__(self) -> ManagedCluster:
        cli = shutil.which("redis-cli")
        if cli is None or shutil.which("redis-server") is None:
            raise RuntimeError("a Redis Cluster needs redis-server and redis-cli")
        try:
            for i in range(self._primaries * (1 + self._replicas)):
                data, port = self._root / f"node{i}", free_port()
                cluster_args = [
                    "--cluster-enabled", "yes",
                    "--cluster-config-file", str(data / f"nodes-{port}.conf"),
                    # Its own free bus port: the default (port + 10000) may be taken.
                    "--cluster-port", str(free_port()),
                    # Replicas sync at once, not after the default 5 s wait for more of them.
                    "--repl-diskless-sync-delay", "0",
                    # Nodes gossip every node-timeout / 2, so the cluster agrees sooner; a node
                    # counts as failing after node-timeout without an answer.
                    "--cluster-node-timeout", str(self._node_timeout_ms),
                ]  # fmt: skip
                server = ManagedRedis(data, port=port, appendonly=False, extra_args=cluster_args)
                self._stack.enter_context(server)
                self.servers.append(server)
            nodes = [f"127.0.0.1:{port}" for port in self.ports]
            replicas = ["--cluster-replicas", str(self._replicas), "--cluster-yes"]
            subprocess.run(
                [cli, "--cluster", "create", *nodes, *replicas],
                check=True,
                capture_output=True,
                timeout=30,
            )
            self._wait_ready()
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stack.close()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT
        while not (all(_cluster_ok(p) for p in self.ports) and self._replicas_attached()):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the Redis Cluster on ports {self.ports} did not reach ok")
            time.sleep(0.05)  # polling interval, not a wait for something to be done

    def _replicas_attached(self) -> bool:
        roles = [_role(port) for port in self.ports]
        connected = [r for r in roles if r[:1] == ["slave"] and r[3] == "connected"]
        return len(connected) == self._primaries * self._replicas


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
