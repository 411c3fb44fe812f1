"""A durable HTTP call (docs/durable.md, "A durable HTTP call"): the ``call`` callback's body,
the call a waiting task's view shows, and the rules both sides share."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)

from sdk.wire.base import InputModel, Json, OutputModel, _pattern, matches

MAX_CALL_TIMEOUT = 900.0
"""Seconds one try of a call may take at most (15 minutes)."""
MAX_CALL_HEADERS = 32
MAX_HEADER_VALUE = 8192
CallMethod = Literal["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"]

# Headers a task may not set: the connection's own (hop-by-hop), those the gateway computes
# (Host, Content-Length) and the one it sets itself (Idempotency-Key).
REFUSED_HEADERS = frozenset(
    {
        "host",
        "content-length",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "upgrade",
        "te",
        "trailer",
        "proxy-authorization",
        "proxy-authenticate",
        "proxy-connection",
        "idempotency-key",
    }
)
URL_PATTERN = r"[Hh][Tt][Tt][Pp][Ss]?://[^/?#\s][^\s]{0,2040}"
CallUrl = Annotated[
    str,
    AfterValidator(matches(URL_PATTERN, "must be an http:// or https:// URL")),
    _pattern(URL_PATTERN),
]
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}")
_VALUE = re.compile(r"[\t\x20-\x7e\x80-\xff]*")


class CallIn(InputModel):
    """Body of the ``call`` callback: the gateway makes this HTTP request on the task's behalf
    and ends this attempt until it answers (the task is pushed again with ``{status, headers,
    body}`` as the step's result) or the call fails (``{error, kind}``)."""

    step: Annotated[str, StringConstraints(min_length=1, max_length=200)] = Field(
        description="The step the answer is recorded as; its Idempotency-Key is "
        "'<task id>:<step>'. Once recorded, a later attempt finds it in the push's steps."
    )
    url: CallUrl = Field(
        description="An http:// or https:// URL, checked by the endpoints' SSRF rules when "
        "the call is made (and each redirect's Location)."
    )
    method: CallMethod = Field("GET", description="The request's method.")
    headers: dict[str, str] = Field(
        default_factory=dict,
        description=f"Request headers (at most {MAX_CALL_HEADERS}; not Host, Content-Length, "
        "Idempotency-Key nor hop-by-hop headers).",
    )
    json_body: Json = Field(
        None, alias="json", description="A JSON body (sent with Content-Type: application/json)."
    )
    body: str | None = Field(None, description="A text body (instead of 'json').")
    timeout: float = Field(
        gt=0,
        le=MAX_CALL_TIMEOUT,
        description="Seconds one try may take until the answer's body is read; then the "
        "step's result is {error, kind: 'timed_out'}.",
    )

    model_config = ConfigDict(
        extra="forbid",
        allow_inf_nan=False,
        defer_build=True,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
    )

    @field_validator("headers")
    @classmethod
    def _headers(cls, headers: dict[str, str]) -> dict[str, str]:
        if len(headers) > MAX_CALL_HEADERS:
            raise ValueError(f"at most {MAX_CALL_HEADERS} headers")
        for name, value in headers.items():
            if not _TOKEN.fullmatch(name):
                raise ValueError(f"{name!r} is not a header name")
            if name.lower() in REFUSED_HEADERS or name.lower().startswith("proxy-"):
                raise ValueError(f"{name!r} is set by the gateway or the connection")
            if len(value) > MAX_HEADER_VALUE or not _VALUE.fullmatch(value):
                raise ValueError(f"the value of {name!r} is too long or holds control chars")
        return headers

    @model_validator(mode="after")
    def _one_body(self) -> CallIn:
        if self.json_body is not None and self.body is not None:
            raise ValueError("give 'json' or 'body', not both")
        return self


class StepCall(OutputModel):
    """The HTTP call a task's step waited for, as the step that recorded its end says."""

    method: str = Field(description="The request's method.")
    url: str = Field(description="The URL the call was made to (before any redirect).")


class TaskCall(StepCall):
    """The HTTP call a waiting task's step waits for."""

    since: datetime = Field(description="When the task asked for the call.")
