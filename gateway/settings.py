"""Gateway settings, read from ``JOBGATE_*`` environment variables (or a ``.env`` file).

``docs/configuration.md`` lists every setting; ``tests/unit/test_docs.py`` keeps that page and
this class in step.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from gateway.store.cluster import is_cluster_url
from gateway.store.sentinel import SentinelUrl, is_sentinel_url

ADMIN_SCOPE = "admin"
READ_SCOPE = "read"
METRICS_SCOPE = "metrics"
ENQUEUE_SCOPE = "enqueue:"
WORK_SCOPE = "work:"
EVENTS_SCOPE = "events:"
VALID_SCOPES = (
    f"{ADMIN_SCOPE}, {READ_SCOPE}, {METRICS_SCOPE}, {ENQUEUE_SCOPE}<queue pattern>, "
    f"{WORK_SCOPE}<queue pattern>, {EVENTS_SCOPE}<event name pattern>"
)


class ApiKey(BaseModel):
    """An API key and what it may do.

    Scopes: ``admin`` (everything), ``read`` (every GET), ``metrics`` (``GET /metrics``
    only), ``enqueue:<queue>`` (enqueue to, and read tasks of, matching queues; ``*`` and ``?``
    patterns allowed, e.g. ``enqueue:mail-*``), ``work:<queue>`` (lease tasks of matching
    queues: pull workers).
    Any other scope is refused here, at start, rather than with a 403 at the first request.
    """

    key: str = Field(min_length=16)
    scopes: list[str] = Field(min_length=1)
    name: str = ""

    @model_validator(mode="after")
    def _known_scopes(self) -> ApiKey:
        unknown = [s for s in self.scopes if not _is_scope(s)]
        if unknown:
            which = f"key '{self.name}'" if self.name else "this key"
            listed = ", ".join(repr(s) for s in unknown)
            noun = "scope" if len(unknown) == 1 else "scopes"
            raise ValueError(f"{which} has unknown {noun} {listed}; valid scopes: {VALID_SCOPES}")
        return self


def _is_scope(scope: str) -> bool:
    if scope in (ADMIN_SCOPE, READ_SCOPE, METRICS_SCOPE):
        return True
    return any(
        scope.startswith(prefix) and len(scope) > len(prefix)
        for prefix in (ENQUEUE_SCOPE, WORK_SCOPE, EVENTS_SCOPE)
    )


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="JOBGATE_", env_file=".env", extra="ignore")

    redis_url: str = Field(
        "redis://127.0.0.1:6379/0",
        description="Redis holding all state: redis:// or rediss://; "
        "redis+cluster://host:port[,host:port...] (or rediss+cluster://) for a Redis Cluster; "
        "or redis+sentinel://host:port[,host:port...]/service[/db] to find the primary through "
        "Redis Sentinel.",
    )
    wait_replicas: int = Field(
        0,
        ge=0,
        le=100,
        description="Replicas an enqueue (or a durable step) must reach before it is "
        "acknowledged (Redis WAIT); when fewer confirm within wait_timeout it answers 503. 0 "
        "waits for none.",
    )
    wait_timeout: float = Field(
        1.0,
        gt=0,
        le=60,
        description="Seconds an enqueue waits for wait_replicas replicas to confirm it.",
    )
    redis_timeout: float = Field(
        5.0,
        gt=0,
        le=300,
        description="Seconds a Redis command may take (connecting, and each reply; an "
        "enqueue's WAIT adds wait_timeout) before the request it serves answers 503 with "
        "Retry-After.",
    )
    compact_records: bool = Field(
        False,
        description="Store a plain queued task's record (no field but its name and run time) "
        "as text, 16 or 32 bytes of Redis memory a queued task less; gateways of versions "
        "before it cannot read such records, so turn it on once every gateway runs this "
        "version.",
    )
    host: str = Field("127.0.0.1", description="Address the HTTP server listens on.")
    port: int = Field(8787, ge=0, le=65535, description="TCP port of the HTTP server.")
    public_url: str | None = Field(
        None,
        description="Base URL workers use to call back; http://<host>:<port> when unset.",
    )
    api_keys: list[ApiKey] = Field(
        default_factory=list,
        description='API keys as JSON: [{"key": "...", "scopes": ["admin"]}].',
    )
    max_body_bytes: int = Field(
        1024 * 1024, ge=1024, description="Largest request body accepted, in bytes."
    )
    allow_private_endpoints: bool = Field(
        False,
        description="Allow endpoint URLs on loopback and private networks (never link-local "
        "or cloud metadata addresses).",
    )
    max_calls_in_flight: int = Field(
        64,
        ge=1,
        le=10_000,
        description="Most durable HTTP calls (ctx.call) one gateway makes at a time; a call "
        "past it is made by a gateway with room once its lease runs out.",
    )
    call_max_body_bytes: int = Field(
        256 * 1024,
        ge=1024,
        le=1024 * 1024,
        description="Largest answer body a durable HTTP call records, in bytes; a larger answer "
        "ends the call with the error kind 'too_large'.",
    )
    dispatch_batch: int = Field(
        64, ge=1, le=1000, description="Most tasks one claim takes from a queue."
    )
    recover_interval: float = Field(
        0.25,
        gt=0,
        le=60,
        description="Shortest time between recoverer runs, in seconds: a due task or expired "
        "lease is handled at most this late. The recoverer sleeps while nothing is due. Also the "
        "time between looks for completion callbacks due.",
    )
    sweep_interval: float = Field(
        60.0,
        ge=0,
        description="Seconds between sweeps of one queue's finished tasks past retention (and "
        "ended dedup windows): a finished task is deleted at most this late.",
    )
    rescan_interval: float = Field(
        60.0,
        gt=0,
        description="Seconds between rescans of every queue's due time, which repair the due "
        "index after a gateway died half way; also the longest the recoverer sleeps.",
    )
    redrive_interval: float = Field(
        5.0,
        gt=0,
        le=300,
        description="Seconds between looks for queues whose redrive pass is due (a queue's "
        "redrive policy sets its own cadence, ``every``); costs nothing while no queue has one.",
    )
    clock_sync_interval: float = Field(
        30.0, gt=0, description="Seconds between measurements of the offset to Redis's clock."
    )
    jobs_interval: float = Field(
        0.25,
        gt=0,
        le=60,
        description="Shortest time between two runs of the job firing loop, in seconds; it "
        "sleeps until the next job is due (woken when a job changes on any gateway).",
    )
    job_misfire_grace: float = Field(
        30.0,
        ge=0,
        description="Seconds late a job's fire time may still be fired on its own; fire times "
        "missed by more (every gateway was down) are coalesced into one run, and those within "
        "it still get a run each.",
    )
    job_resume_after: float = Field(
        30.0,
        gt=0,
        le=3600,
        description="Seconds after a run was begun that any gateway enqueues its task if the "
        "gateway that claimed it has not (it stopped in between).",
    )
    job_runs_kept: int = Field(
        1000, ge=1, description="Run records kept per job (the oldest are dropped)."
    )
    certfile: Path | None = Field(
        None, description="TLS certificate (PEM); enables HTTPS and HTTP/3 over QUIC."
    )
    keyfile: Path | None = Field(None, description="TLS private key (PEM).")
    quic_port: int | None = Field(
        None, description="UDP port for HTTP/3; the TCP port when unset and TLS is on."
    )
    server: Literal["auto", "uvicorn", "hypercorn"] = Field(
        "auto",
        description="The HTTP server on TCP: uvicorn (HTTP/1.1, the least CPU per request) or "
        "Hypercorn (HTTP/1.1 and HTTP/2, and HTTP/3 over QUIC with TLS); auto is uvicorn "
        "without TLS and Hypercorn with it.",
    )
    log_level: str = Field("info", description="Log level: debug, info, warning, error.")
    gc_threshold: int = Field(
        20_000,
        ge=0,
        description="Allocations between two collections of the youngest generation by Python's "
        "cyclic garbage collector in jobgate serve and jobgate dev (Python's default is 700, "
        "which cost about a sixth of the gateway's CPU under load); 0 keeps Python's default.",
    )
    access_log: bool = Field(
        False,
        description="Log one line per request (method, path, status, duration, request id) on "
        "the gateway.access logger; jobgate dev turns it on unless this is set.",
    )
    log_lines_kept: int = Field(
        10_000,
        ge=1,
        le=1_000_000,
        description="Most log lines kept per task: the last ones; the task's log says how many "
        "earlier lines were dropped.",
    )
    notify_timeout: float = Field(
        10.0, gt=0, le=300, description="Seconds a completion callback's receiver has to answer."
    )
    notify_max_tries: int = Field(
        20,
        ge=1,
        le=1000,
        description="Tries of a completion callback before it is recorded as failed.",
    )
    notify_retry_delay: float = Field(
        1.0,
        gt=0,
        le=3600,
        description="Seconds before the first retry of a completion callback; doubled at each "
        "try (full jitter).",
    )
    notify_max_retry_delay: float = Field(
        3600.0, gt=0, le=86400, description="Longest wait between completion callback tries."
    )
    idempotency_ttl: int = Field(
        86400, ge=1, description="Seconds the answer to a POST with an Idempotency-Key is kept."
    )
    event_retention: int = Field(
        7 * 86400,
        ge=60,
        le=365 * 86400,
        description="Seconds an accepted event is kept, with what it started, resumed and "
        "cancelled (7 days by default); the recoverer deletes older ones. A producer's retry "
        "of an event id older than this is a new event.",
    )
    session_secret: SecretStr | None = Field(
        None,
        description="Key that signs admin UI sessions (16+ characters); every gateway behind "
        "one load balancer needs the same. When unset it is derived from the API keys.",
        min_length=16,
    )
    session_ttl: int = Field(
        43200, ge=60, description="Seconds an admin UI sign-in lasts (12 hours by default)."
    )
    metrics: bool = Field(
        True,
        description="Record OpenTelemetry metrics, served on GET /metrics (Prometheus text) and "
        "sent over OTLP when OTEL_EXPORTER_OTLP_ENDPOINT is set; false records nothing.",
    )
    metrics_max_task_names: int = Field(
        100,
        ge=1,
        le=100_000,
        description="Task names (and versions) per queue that metrics tell apart besides those "
        "in the task catalog; further names are recorded as 'other'.",
    )
    test_pause_after_claim_ms: int = Field(
        0,
        ge=0,
        le=600_000,
        description="For tests only: milliseconds the gateway waits between claiming a job's "
        "firing (or recording a run now) and enqueuing its task, logging a warning first, so a "
        "test can kill it there. 0 (always, outside tests) waits not at all.",
    )

    @field_validator("redis_url")
    @classmethod
    def _sentinel_url_parses(cls, value: str) -> str:
        if is_sentinel_url(value):
            SentinelUrl.parse(value)  # a malformed one is refused at start, saying why
        return value

    @model_validator(mode="after")
    def _wait_needs_one_primary(self) -> Settings:
        if self.wait_replicas and is_cluster_url(self.redis_url):
            raise ValueError(
                "wait_replicas is not supported with a Redis Cluster URL (WAIT must run on the "
                "connection that wrote); set JOBGATE_WAIT_REPLICAS=0"
            )
        return self

    @field_validator("public_url")
    @classmethod
    def _no_trailing_slash(cls, value: str | None) -> str | None:
        return value.rstrip("/") if value else value

    @property
    def callback_base(self) -> str:
        """Where workers call back: ``public_url``, else this server's own address (https when
        TLS is on; loopback for a wildcard bind, so set ``public_url`` when workers run on other
        machines)."""
        if self.public_url:
            return self.public_url
        scheme = "https" if self.certfile else "http"
        host = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}.get(self.host, self.host)
        if ":" in host:
            host = f"[{host}]"
        return f"{scheme}://{host}:{self.port}"
