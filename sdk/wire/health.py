"""What the gateway's probes answer: ``/healthz`` (liveness) and ``/readyz`` (readiness)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from sdk.wire.base import OutputModel


class Health(OutputModel):
    """The process is alive and serves HTTP; nothing else is checked."""

    status: Literal["ok"] = "ok"


class Readiness(OutputModel):
    """Whether this gateway can do its work now: answered 200 when ready, 503 when not."""

    ready: bool
    checks: dict[str, str] = Field(
        description="Each check ('redis', 'scripts', 'loops') with 'ok' or the reason it failed."
    )
    checked_at: float = Field(
        description="Unix time of the check this answer reports: checks are shared for up to "
        "a second, so probes cannot load Redis."
    )
