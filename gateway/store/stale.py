"""Connections Redis closed while they sat in the pool: never a failed request once it is back.

After Redis restarts (or fails over, or drops clients by ``CLIENT KILL`` or its idle
``timeout``), every connection the gateway's pool kept from before is closed at the server's
end. Two things keep a request from paying for that:

- **The pool looks before it lends.** redis-py's pool checks a connection as it lends it and
  opens it again when the server has closed it (:meth:`ConnectionPool.ensure_connection`), but
  redis-py 8 skips that check when its maintenance notifications are on, and they are on by
  default with RESP3 (``"auto"``), for Redis Enterprise's announcements of moves. The gateway
  turns them off (:func:`pool_options`), so the check runs again: each dead
  connection is opened anew, before anything is written to it. Without this, for seconds after
  a restart and ``/readyz`` answering 200 again, each first use of a connection from before the
  restart answered 503 ("Connection closed by server"), and so did the clock sync and the
  completion notices up to a minute later, when a burst reached the connections at the bottom
  of the pool.
- **A command that met a closed connection all the same is sent once more, at once, on a new
  one.** The check sees only what the event loop has read: a connection the server closes in
  the same turn of the loop, or one that the health check (a ``PING`` before a command on a
  connection idle for 30 s) finds dead, still fails. Such a failure is a
  :class:`StaleConnection`, and the connections' ``retry`` (:data:`STALE_RETRY`, redis-py's own
  :class:`~redis.asyncio.retry.Retry`, which every command, pipeline and health check goes
  through) sends it again at once, once, on a connection opened for it.

Which failures are stale, so that sending again cannot run a command twice: the connection
found closed (a socket error, or its end: "Connection closed by server") while writing to a
connection that was open before the command (not opened for it), or on the first read after
such a write, before any reply came back. Redis runs nothing from a connection
it closed before the command reached it; a server that died after running it does not answer
the new connection (it is not back within the microseconds the retry takes: the answer is
"connection refused", raised as before). Not stale, so not sent again: a timeout (the command
may be running), an error on a connection opened for the command (Redis's state now), an error
after a reply came back (the server read the command), an answer redis-py raises as a
connection error (``LOADING`` while Redis reads its AOF: a 503 until it is done, as
``/readyz`` says), and any error on a pub/sub connection
(the pub/sub reader sees its breaks itself and makes up for the messages lost meanwhile:
:mod:`gateway.store.pubsub`). The one case where a command could run twice is a live server
that closes a connection between running a command and answering it (a ``CLIENT KILL`` in that
instant). A repeat is then as harmless as the resend after a lost answer: an enqueue finds
its id taken and is read back as stored, a finish or a heartbeat is fenced by its lease token,
and a claim leases the next tasks, which no push carries: they go out again when that lease
expires, as after a gateway that died mid-push (``docs/operator-guide.md``).
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError


def pool_options() -> dict[str, Any]:
    """The pool's options that keep its check of a connection it lends: maintenance
    notifications off. None with a redis-py whose asyncio client has no maintenance
    notifications: its pool always checks, and takes no such option (pyproject.toml allows
    redis-py 5; only 8.1 is tested)."""
    try:
        from redis.asyncio import maint_notifications  # noqa: F401
        from redis.maint_notifications import MaintNotificationsConfig
    except ImportError:
        return {}
    return {"maint_notifications_config": MaintNotificationsConfig(enabled=False)}


class StaleConnection(ConnectionError):
    """A command met a connection that Redis had closed before the command reached it."""


STALE_RETRY = Retry(NoBackoff(), 1, supported_errors=(StaleConnection,))


class _SendsAgainWhenStale:
    """Raises :class:`StaleConnection` for the failures that are stale (module docstring).
    Mixed into the pool's connection class by :func:`stale_aware`."""

    _opened = 0  # sockets this connection has opened, to tell a reused one from a new one
    _unanswered = False  # written to a reused connection, no reply read since

    async def _connect(self) -> None:
        await super()._connect()  # type: ignore[misc]
        self._opened += 1

    async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        opened = self._opened if self.is_connected else None  # type: ignore[attr-defined]
        try:
            await super().send_packed_command(command, check_health)  # type: ignore[misc]
        except ConnectionError as e:
            if opened == self._opened and _closed(e) and self._may_send_again():
                raise StaleConnection(f"{e} (on a connection Redis had closed)") from e
            raise
        self._unanswered = opened == self._opened and self._may_send_again()

    def read_response(self, *args: Any, **kwargs: Any) -> Awaitable[Any]:
        reading: Awaitable[Any] = super().read_response(*args, **kwargs)  # type: ignore[misc]
        if not self._unanswered:  # a reply came since the write: redis-py's read, as it is
            return reading
        self._unanswered = False
        return self._first_read(reading)

    async def _first_read(self, reading: Awaitable[Any]) -> Any:
        try:
            return await reading
        except ConnectionError as e:
            if _closed(e):
                raise StaleConnection(f"{e} (on a connection Redis had closed)") from e
            raise

    def _may_send_again(self) -> bool:
        # A pub/sub connection has a callback that subscribes it again when it connects.
        return not self._connect_callbacks  # type: ignore[attr-defined]


def _closed(error: ConnectionError) -> bool:
    """Whether ``error`` is the connection's end, as redis-py raises it (its base class): not
    an answer of Redis that it raises as a connection error (``LOADING``, refused
    authentication), which is Redis's state now."""
    return type(error) is ConnectionError


def stale_aware(connection_class: type[Any]) -> type[Any]:
    """``connection_class`` raising :class:`StaleConnection` for the stale failures."""
    return type(
        f"StaleAware{connection_class.__name__}", (_SendsAgainWhenStale, connection_class), {}
    )
