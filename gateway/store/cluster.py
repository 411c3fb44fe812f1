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
"""

from __future__ import annotations

import logging
from typing import cast
from urllib.parse import unquote, urlsplit

from redis.asyncio import Redis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.exceptions import ResponseError

log = logging.getLogger(__name__)

SCHEMES = ("redis+cluster", "rediss+cluster")
# Connections per node. Unlike the single-Redis pool, the cluster client does not wait for a
# free one: past this many commands in flight on one node it raises MaxConnectionsError.
MAX_CONNECTIONS_PER_NODE = 128


class BadClusterUrl(ValueError):
    """A ``redis+cluster://`` URL that names no node, or a node without a port."""


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
    cluster = RedisCluster(
        startup_nodes=[ClusterNode(host, port) for host, port in startup_nodes(url)],
        username=unquote(parts.username) if parts.username else None,
        password=unquote(parts.password) if parts.password else None,
        ssl=parts.scheme.lower() == "rediss+cluster",
        decode_responses=True,
        health_check_interval=30,
        max_connections=MAX_CONNECTIONS_PER_NODE,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
    )
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
