"""The wire contract's ground rules: header names, name formats, and the two model bases.

Inputs (what a client sends) forbid unknown fields; outputs (what a server sends) ignore
fields added by newer servers. Errors are RFC 9457 problem documents.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

HEADER_LEASE = "jobgate-lease"
HEADER_CALLBACK = "jobgate-callback"
HEADER_ATTEMPT = "jobgate-attempt"
HEADER_BATCH = "jobgate-batch"
PROBLEM_CONTENT_TYPE = "application/problem+json"

_QUEUE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_TASK_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:-]{0,199}$")
_ULID = re.compile(r"^[0-7][0-9A-HJKMNP-TV-Z]{25}$")
_CAPABILITY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$")
_KEY = re.compile(r"^[\x21-\x7e]{1,256}$")

MAX_PRIORITY = 1000
DAY = 86_400.0


def check_queue_name(name: str) -> str:
    """Check a queue name: 1 to 64 letters, digits, dots, underscores or dashes."""
    if not _QUEUE_NAME.match(name):
        raise ValueError(
            "must be 1-64 characters of letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return name


def _check_task_name(name: str) -> str:
    if not _TASK_NAME.match(name):
        raise ValueError(
            "must be 1-200 characters of letters, digits, '_', '.', ':' or '-', "
            "starting with a letter or '_'"
        )
    return name


def _check_ulid(value: str) -> str:
    upper = value.upper()
    if not _ULID.match(upper):
        raise ValueError("must be a ULID: 26 Crockford base32 characters")
    return upper


def _check_capability(value: str) -> str:
    if not _CAPABILITY.match(value):
        raise ValueError("must be 1-64 characters of letters, digits, '.', '_', ':' or '-'")
    return value


def _check_key(value: str) -> str:
    if not _KEY.match(value):
        raise ValueError("must be 1-256 printable ASCII characters without spaces")
    return value


QueueName = Annotated[str, AfterValidator(check_queue_name)]
TaskName = Annotated[str, AfterValidator(_check_task_name)]
TaskId = Annotated[str, AfterValidator(_check_ulid)]
Capability = Annotated[str, AfterValidator(_check_capability)]
Key = Annotated[str, AfterValidator(_check_key)]
GroupName = Annotated[str, AfterValidator(_check_capability)]
Label = Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[\x21-\x7e]+$")]
Seconds = Annotated[float, Field(ge=0, le=365 * DAY)]
PositiveSeconds = Annotated[float, Field(gt=0, le=365 * DAY)]


class InputModel(BaseModel):
    """What a client sends: unknown fields are an error, not silently dropped."""

    model_config = ConfigDict(extra="forbid")


class OutputModel(BaseModel):
    """What a server sends: tolerant of fields added by newer servers."""

    model_config = ConfigDict(extra="ignore")


class FieldError(OutputModel):
    field: str = Field(description="Dotted path of the offending field, e.g. 'tasks.0.name'.")
    reason: str


class Problem(OutputModel):
    """An RFC 9457 problem document."""

    type: str = "about:blank"
    title: str
    status: int
    detail: str | None = None
    errors: list[FieldError] | None = None
