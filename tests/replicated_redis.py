"""Real Redis replication on loopback for tests: replicas of a primary, and Sentinels.

Built on :class:`gateway.serving.redis_server.ManagedRedis`: a replica is a ManagedRedis started
with ``--replicaof``; a Sentinel is ``redis-server <conf> --sentinel`` with a config file (which
Sentinel rewrites) in its own data directory.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import redis

from gateway.serving.redis_server import ManagedRedis

HOST = "127.0.0.1"
# For a primary: a replica's first sync starts at once, not after Redis's default 5 s wait for
# more replicas to share it.
PRIMARY_ARGS = ("--repl-diskless-sync-delay", "0")


def primary_at(data_dir: Path) -> ManagedRedis:
    """A (not yet started) primary whose replicas sync at once."""
    return ManagedRedis(data_dir, appendonly=False, extra_args=PRIMARY_ARGS)


def replica_of(primary: ManagedRedis, data_dir: Path) -> ManagedRedis:
    """A (not yet started) replica of ``primary``."""
    return ManagedRedis(
        data_dir,
        appendonly=False,
        extra_args=[*PRIMARY_ARGS, "--replicaof", HOST, str(primary.port)],
    )


def wait_until_replicating(replica: ManagedRedis, timeout: float = 10.0) -> None:
    """Return once ``replica``'s link to its primary is up (the first sync is done)."""
    deadline = time.monotonic() + timeout
    with redis.Redis(host=HOST, port=replica.port, decode_responses=True) as client:
        while client.info("replication").get("master_link_status") != "up":
            if time.monotonic() > deadline:
                raise AssertionError(f"replica on port {replica.port} did not sync in time")
            time.sleep(0.02)


class ManagedSentinel(ManagedRedis):
    """A Redis Sentinel watching ``primary`` under ``service``, with a short failure detection
    (``down_after_ms``) so tests fail over in seconds."""

    def __init__(
        self,
        data_dir: Path,
        primary: ManagedRedis,
        service: str,
        *,
        quorum: int = 2,
        down_after_ms: int = 1000,
        failover_timeout_ms: int = 3000,
    ) -> None:
        super().__init__(data_dir, appendonly=False)
        self._conf = (
            f"sentinel monitor {service} {HOST} {primary.port} {quorum}\n"
            f"sentinel down-after-milliseconds {service} {down_after_ms}\n"
            f"sentinel failover-timeout {service} {failover_timeout_ms}\n"
            f"sentinel parallel-syncs {service} 1\n"
        )

    def _command(self, executable: str) -> list[str]:
        conf = self.data_dir / "sentinel.conf"
        if not conf.exists():  # Sentinel rewrites it; a restart keeps what it learned
            conf.write_text(self._conf)
        return [
            executable, str(conf), "--sentinel",
            "--bind", HOST,
            "--port", str(self.port),
            "--dir", str(self.data_dir),
            "--daemonize", "no",
        ]  # fmt: skip


@dataclass
class ReplicatedRedis:
    """A primary, its replicas and the Sentinels watching it as ``service``, all started."""

    primary: ManagedRedis
    replicas: list[ManagedRedis]
    sentinels: list[ManagedSentinel]
    service: str

    @property
    def url(self) -> str:
        """The gateway's ``redis+sentinel://`` URL for this group."""
        hosts = ",".join(f"{HOST}:{s.port}" for s in self.sentinels)
        return f"redis+sentinel://{hosts}/{self.service}/0"

    def primary_port(self) -> int:
        """The primary's port as the first Sentinel knows it."""
        with redis.Redis(host=HOST, port=self.sentinels[0].port, decode_responses=True) as s:
            _, port = s.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.service)
            return int(port)

    def wait_until_watched(self, timeout: float = 15.0) -> None:
        """Return once every Sentinel knows the others and every replica: only then can they
        agree on a failover."""
        deadline = time.monotonic() + timeout
        for sentinel in self.sentinels:
            with redis.Redis(host=HOST, port=sentinel.port, decode_responses=True) as s:
                while True:
                    state = s.sentinel_master(self.service)
                    others, replicas = len(self.sentinels) - 1, len(self.replicas)
                    if (
                        int(state["num-other-sentinels"]) >= others
                        and int(state["num-slaves"]) >= replicas
                    ):
                        break
                    if time.monotonic() > deadline:
                        raise AssertionError(f"Sentinel on port {sentinel.port} sees only {state}")
                    time.sleep(0.05)


@contextmanager
def replicated_redis(
    data_dir: Path, *, replicas: int = 2, sentinels: int = 3, service: str = "jobgate"
) -> Iterator[ReplicatedRedis]:
    """A primary with ``replicas`` replicas and ``sentinels`` Sentinels (quorum: a majority),
    stopped again on exit."""
    with ExitStack() as stack:
        primary = stack.enter_context(primary_at(data_dir / "primary"))
        followers = [
            stack.enter_context(replica_of(primary, data_dir / f"replica-{i}"))
            for i in range(replicas)
        ]
        for follower in followers:
            wait_until_replicating(follower)
        quorum = sentinels // 2 + 1
        watchers = [
            stack.enter_context(
                ManagedSentinel(data_dir / f"sentinel-{i}", primary, service, quorum=quorum)
            )
            for i in range(sentinels)
        ]
        group = ReplicatedRedis(primary, followers, watchers, service)
        group.wait_until_watched()
        yield group
