"""Waiting for replicas: an enqueue (or a durable step) acknowledged only once Redis replicas
hold it.

Redis replicates asynchronously: a primary that dies right after a write may take it with it,
and the replica promoted in its place never had it. ``WAIT numreplicas timeout`` (sent on the
connection that wrote, right after the write) blocks until that many replicas confirmed every
write of that connection so far, or the timeout passed, and answers how many did. A write
confirmed by a replica survives a failover to that replica; WAIT does not make Redis strongly
consistent (a failover may still pick a replica that had not confirmed), but it narrows the
window to writes no client was told were stored.
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.core.errors import NotReplicated


@dataclass(frozen=True, slots=True)
class Durability:
    """How many replicas must confirm a write (0: none, no WAIT sent) and how long to wait."""

    replicas: int = 0
    timeout: float = 1.0

    @property
    def waits(self) -> bool:
        return self.replicas > 0

    def wait_command(self) -> tuple[str, int, int]:
        """The ``WAIT`` command's words, to pipeline right after the write."""
        return ("WAIT", self.replicas, max(1, round(self.timeout * 1000)))

    def confirm(self, confirmed: int, outcome: str | None = None) -> None:
        """Raise NotReplicated when fewer replicas than asked confirmed (``outcome``: what
        the answer says of the write, when not an enqueue's)."""
        if confirmed < self.replicas:
            if outcome is None:
                raise NotReplicated(self.replicas, confirmed, self.timeout)
            raise NotReplicated(self.replicas, confirmed, self.timeout, outcome)


NO_WAIT = Durability()
