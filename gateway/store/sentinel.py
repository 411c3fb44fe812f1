"""Finding the Redis primary through Redis Sentinel: the ``redis+sentinel://`` URL.

``redis+sentinel://[[user]:password@]host[:port][,host[:port]...]/service[/db]`` names the
Sentinels (port 26379 when left out) and the service (the name in ``sentinel monitor``) whose
primary holds the state. The user and password are those of the Redis servers; the Sentinels
are asked without them. The client asks a Sentinel for the primary's address whenever it opens
a connection, so after a failover every new connection, the pub/sub one included, goes to the
promoted replica. Connections to a primary that went away fail (the request answers 503) and
are opened again on the next command.

Known: during a failover redis-py's asyncio Sentinel client (8.1) loses track of a few of its
connections to a Sentinel while it looks for the primary; Python closes them when it collects
them (with a ResourceWarning, which is not shown by default). A few sockets per failover.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.sentinel import Sentinel, SentinelConnectionPool

SCHEME = "redis+sentinel://"
DEFAULT_PORT = 26379


class BlockingSentinelPool(SentinelConnectionPool, BlockingConnectionPool):
    """A Sentinel-managed pool that, like the gateway's plain one, waits for a free connection
    instead of failing when all are busy."""


class SentinelRedis(Redis):
    """A client of the primary that also closes its connections to the Sentinels."""

    async def aclose(self, close_connection_pool: bool | None = None) -> None:
        await super().aclose(close_connection_pool)
        pool = self.connection_pool
        if isinstance(pool, SentinelConnectionPool):
            for sentinel in pool.sentinel_manager.sentinels:
                await sentinel.aclose()


@dataclass(frozen=True, slots=True)
class SentinelUrl:
    sentinels: tuple[tuple[str, int], ...]
    service: str
    db: int = 0
    username: str | None = None
    password: str | None = None

    @classmethod
    def parse(cls, url: str) -> SentinelUrl:
        """Raises ValueError, saying what is wrong, for a malformed URL."""
        if not url.startswith(SCHEME):
            raise ValueError(f"a Sentinel URL starts with {SCHEME}")
        location, _, path = url.removeprefix(SCHEME).partition("/")
        userinfo, at, hosts = location.rpartition("@")
        username = password = None
        if at:
            user, colon, secret = userinfo.partition(":")
            username = unquote(user) or None
            password = unquote(secret) if colon else None
        sentinels = tuple(_host_port(h) for h in hosts.split(","))
        service, _, db = path.strip("/").partition("/")
        if not service:
            raise ValueError(f"name the Sentinel service: {SCHEME}host:port/<service>[/db]")
        if db and not db.isdigit():
            raise ValueError(f"the database after the service must be a number, not {db!r}")
        return cls(sentinels, service, int(db or 0), username, password)


def _host_port(text: str) -> tuple[str, int]:
    if not text:
        raise ValueError("a Sentinel URL names at least one host: redis+sentinel://host:port/…")
    if text.startswith("["):  # [IPv6]:port
        host, _, rest = text[1:].partition("]")
        port = rest.removeprefix(":")
    else:
        host, _, port = text.partition(":")
    if not host or (port and not port.isdigit()):
        raise ValueError(f"a Sentinel is host[:port], not {text!r}")
    return host, int(port or DEFAULT_PORT)


def is_sentinel_url(url: str) -> bool:
    return url.startswith(SCHEME)


def sentinel_client(url: str, **pool: Any) -> Redis:
    """A client of the primary of the URL's service; ``pool`` are connection pool options."""
    where = SentinelUrl.parse(url)
    sentinel = Sentinel(  # type: ignore[no-untyped-call]
        list(where.sentinels),
        sentinel_kwargs={"socket_timeout": 1.0, "socket_connect_timeout": 1.0},
    )
    client: Redis = sentinel.master_for(
        where.service,
        redis_class=SentinelRedis,
        connection_pool_class=BlockingSentinelPool,
        db=where.db,
        username=where.username,
        password=where.password,
        **pool,
    )
    return client
