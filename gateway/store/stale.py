"""Connections Redis closed while they sat in the pool: never a failed request once it is back.

After Redis restarts (or fails over, or drops clients by ``CLIENT KILL`` or its idle
``timeout``), every connection the gateway's pool kept from before is closed at the server's
end. What keeps a request from paying for that:

- **The pool looks before it lends.** redis-py's pool checks a connection as it lends it and
  opens it again when the server has closed it (:meth:`ConnectionPool.ensure_connection`), but
  redis-py 8 skips that check when its maintenance notifications are on, and they are on by
  default with RESP3 (``"auto"``), for Redis Enterprise's announcements of moves. The gateway
  turns them off (:data:`NO_MAINTENANCE_NOTICES`), so the check runs again: each dead
  connection is opened anew, before anything is written to it. Without this, for seconds after
  a restart and ``/readyz`` answering 200 again, each first use of a connection from before the
  restart answered 503 ("Connection closed by server"), and so did the clock sync and the
  completion notices up to a minute later, when a burst reached the connections at the bottom
  of the pool.
"""

from __future__ import annotations

from redis.maint_notifications import MaintNotificationsConfig

NO_MAINTENANCE_NOTICES = MaintNotificationsConfig(enabled=False)
