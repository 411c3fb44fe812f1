"""The probes: ``/healthz`` (liveness) and ``/readyz`` (readiness), unauthenticated.

Liveness checks nothing but that the process serves HTTP, so a restart is never triggered by a
Redis outage that a restart would not fix; readiness (:mod:`gateway.services.readiness`) says
whether this gateway can do its work, for load balancers and Kubernetes' readiness probes.
"""

from __future__ import annotations

from pydantic import BaseModel

from gateway.api.routing import Call, Operation, Reply
from gateway.security.auth import Access
from sdk.wire import Health, Readiness


async def healthz(call: Call) -> BaseModel:
    return Health()


async def readyz(call: Call) -> Reply:
    readiness = call.services.readiness
    if readiness is None:  # an app without background loops (tests of the API alone)
        return Reply(Readiness(ready=True, checks={}, checked_at=0.0))
    report = await readiness.check()
    if report.ready:
        return Reply(report)
    return Reply(report, status=503, headers={"retry-after": "1"})


OPERATIONS = [
    Operation(
        "GET",
        "/healthz",
        "Liveness: the process serves HTTP",
        "health",
        Access.PUBLIC,
        healthz,
        response=Health,
        description="Checks nothing else (not Redis): use /readyz to route traffic.",
    ),
    Operation(
        "GET",
        "/readyz",
        "Readiness: Redis answers, the scripts are loaded, the background loops run",
        "health",
        Access.PUBLIC,
        readyz,
        response=Readiness,
        also=(503,),
        description="200 when every check is 'ok', else 503 with the same body naming the "
        "failed check and why. One check serves all probes for a second, so probing cannot "
        "load Redis.",
    ),
]
