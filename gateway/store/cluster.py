"""Connecting to a Redis Cluster: ``redis+cluster://`` and ``rediss+cluster://`` URLs.

The URL names one or more nodes of the cluster to start from; the client learns the rest
(``CLUSTER SLOTS``) and follows the slots as they move::

    redis+cluster://[user:password@]host:port[,host:port...][/]
    rediss+cluster://...   (TLS)

A cluster has only database 0, so the path is empty or ``/`` (``/0`` is accepted too).

The store is written against :class:`redis.asyncio.Redis`; :class:`RedisCluster` answers the
same commands (it routes each by its key's slot, runs keyless ones on one node, and splits
multi-key DEL by slot), so the client is handed on under that type. What differs on a cluster
is handled where it happens: scripts are loaded on every primary (redis-py routes ``SCRIPT
LOAD`` and ``SCRIPT EXISTS`` to all of them; a replica promoted later gets them at the first
NOSCRIPT), and ``maxmemory-policy`` is read from every primary here (``connect()`` refuses a
cluster where one evicts keys).

At a failover, a command that meets CLUSTERDOWN and a pipeline that meets a connection error
make redis-py close every connection to every node (``RedisCluster.aclose()``) before it
re-reads the slot map, the connections other commands are writing on at that moment included.
Writing on one of those raises what is not a ``RedisError`` (uvloop's ``RuntimeError: unable to
perform operation on <TCPTransport closed=True>``; ``AttributeError`` on the writer redis-py
has already dropped), which redis-py neither retries nor the gateway knows as a Redis failure:
it answered 500. The cluster's connections here (:class:`ClusterConnection`) raise redis-py's
``ConnectionError`` instead: the command was not sent, so redis-py sends it again on the
re-read map (a command three times, a pipeline three times), and one that still fails is a
Redis failure, answered 503 with ``Retry-After`` (:mod:`.failures`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import cast
from urllib.parse import unquote, urlsplit

from redis.asyncio import Redis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.connection import Connection, SSLConnection
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError

log = logging.getLogger(__name__)

SCHEMES = ("redis+cluster", "rediss+cluster")
# Connections per node. Unlike the single-Redis pool, the cluster client does not wait for a
# free one: past this many commands in flight on one node it raises MaxConnectionsError.
MAX_CONNECTIONS_PER_NODE = 128


class BadClusterUrl(ValueError):
    """A ``redis+cluster://`` URL that names no node, or a node without a port."""


class ClusterConnection(Connection):
    """A connection to a cluster node whose writes fail as redis-py's ``ConnectionError`` when
    another task closed it under them (see the module's docstring)."""

    async def send_packed_command(
        self, command: bytes | str | Iterable[bytes], check_health: bool = True
    ) -> None:
        try:
            await super().send_packed_command(command, check_health)
        except (RuntimeError, AttributeError) as e:
            # What writing raises once the transport (uvloop) or the writer (redis-py sets it
            # to None) is gone; an OSError is redis-py's ConnectionError already.
            raise RedisConnectionError(
                f"the connection to {self.host}:{self.port} was closed while a command was "
                "written to it (the cluster client re-reading its slot map)"
            ) from e


class ClusterSSLConnection(ClusterConnection, SSLConnection):
    """:class:`ClusterConnection` over TLS."""


def _guard_connections(cluster: RedisCluster, tls: bool) -> None:
    """Make the connections of ``cluster``'s nodes :class:`ClusterConnection`: those of the
    nodes named at the start, and of every node the client learns of later (made with the
    client's ``connection_kwargs``). redis-py's async cluster client takes no connection class
    of its own, and none of its nodes has opened a connection yet."""
    connection_class = ClusterSSLConnection if tls else ClusterConnection
    cluster.connection_kwargs["connection_class"] = connection_class
    for node in cluster.nodes_manager.startup_nodes.values():
        node.connection_class = connection_class


def is_cluster_url(url: str) -> bool:
    return url.split("://", 1)[0].lower() in SCHEMES


def startup_nodes(url: str) -> list[tuple[str, int]]:
    """The ``(host, port)`` of every node a cluster URL names, in order."""
    netloc = urlsplit(url).netloc.rpartition("@")[2]
    nodes = []
    for node in filter(None, netloc.split(",")):
        host, _, port = node.rpartition(":")
        if not host or not port.isdigit():
            raise BadClusterUrl(f"{url!r}: each node must be host:port, not {node!r}")
        nodes.append((host.strip("[]"), int(port)))
    if not nodes:
        raise BadClusterUrl(f"{url!r} names no node of the cluster")
    path = urlsplit(url).path
    if path not in ("", "/", "/0"):
        raise BadClusterUrl(f"{url!r}: a Redis Cluster has only database 0")
    return nodes


async def connect_cluster(url: str, timeout: float) -> tuple[Redis, list[str]]:
    """A cluster client for ``url``, and the primaries that would evict keys, as
    ``"<node>: <maxmemory-policy>"`` (the caller refuses a cluster with any). ``timeout``: how
    long connecting to a node, and each reply, may take."""
    parts = urlsplit(url)
    tls = parts.scheme.lower() == "rediss+cluster"
    cluster = RedisCluster(
        startup_nodes=[ClusterNode(host, port) for host, port in startup_nodes(url)],
        username=unquote(parts.username) if parts.username else None,
        password=unquote(parts.password) if parts.password else None,
        ssl=tls,
        decode_responses=True,
        health_check_interval=30,
        max_connections=MAX_CONNECTIONS_PER_NODE,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
    )
    _guard_connections(cluster, tls)
    try:
        policies = await cluster.config_get("maxmemory-policy", target_nodes=RedisCluster.PRIMARIES)
    except ResponseError:
        log.warning("cannot read maxmemory-policy (CONFIG is disabled); make sure it is noeviction")
        return cast(Redis, cluster), []
    except Exception:
        await cluster.aclose()
        raise
    # One node answers a dict, several a dict of them by node name.
    answers = cast(dict[str, dict[str, str]], policies)
    by_node = answers if "maxmemory-policy" not in answers else {"": policies}
    evicting = [
        f"{node}: {answer.get('maxmemory-policy')}"
        for node, answer in by_node.items()
        if answer.get("maxmemory-policy") != "noeviction"
    ]
    return cast(Redis, cluster), evicting
