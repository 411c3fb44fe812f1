"""The wire contract's ground rules: header names, name formats, and the two model bases.

Inputs (what a client sends) forbid unknown fields, NaN and Infinity; outputs (what a server
sends) ignore fields added by newer servers. Errors are RFC 9457 problem documents.

An output may hold an input model: a :class:`~sdk.wire.queues.Queue` answers with the
``QueuePolicy`` it was given, a job with its ``schedule``, a log page with its lines (``LogLine``).
Which rule holds is chosen per validation, not per model, so each field is declared once:
reading an output (``OutputModel.model_validate``/``model_validate_json``) validates in
pydantic's ``extra="ignore"`` mode, which reaches every model inside the answer, inputs
included, and an SDK older than its gateway reads a policy that gained a field; the gateway
reads every request body with ``extra="forbid"`` (``gateway.api.body``), so an unknown field
is refused at any depth. Built in Python, an input model still refuses a misspelt field (its
own ``extra="forbid"``). The JSON Schema follows: an input model's schema in validation mode
(a request) says ``additionalProperties: false``, in serialization mode (inside an answer) it
does not, and ``openapi.yaml`` shows the second as ``<Model>View`` (``QueuePolicyView``). A
twin class per embedded input (``QueuePolicyView(QueuePolicy)``) was the other way: each
twin must restate every field whose type is another input (``backoff: BackoffView``, with its
default and description), and mypy sees two types where there is one shape.

A value outside an enum (a task state a newer gateway added) is not guessed at: the SDK
raises :class:`~sdk.errors.UnreadableAnswer`, naming the field and the value, and saying an
SDK older than its gateway is the likely cause. A lenient fallback (the raw string) would
make every ``state`` a ``TaskState | str`` to its readers and let a wait loop take a new
final state for a running one. A tally keyed by an enum is the exception: a queue's
``counts`` leaves out the states the SDK does not know, or no queue would read at all.

The gateway validates every input strictly, from its JSON (``gateway.api.body``): no coercion
of ``true`` to 1 or of ``"5"`` to 5, date-times only as RFC 3339 strings. The SDK builds the
same models from Python values (``datetime`` objects, enum members), in pydantic's lax mode.
"""

from __future__ import annotations

import functools
import json
import re
import typing
from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Any, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    GetJsonSchemaHandler,
    JsonValue,
    ValidationInfo,
    WithJsonSchema,
)
from pydantic.config import ExtraValues
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, ErrorDetails

HEADER_LEASE = "jobgate-lease"
HEADER_CALLBACK = "jobgate-callback"
HEADER_ATTEMPT = "jobgate-attempt"
HEADER_BATCH = "jobgate-batch"
HEADER_WARNING = "jobgate-warning"  # a success answered inline with a warning (percent-encoded)
# On an error answer: the task itself failed (it raised), the endpoint is fine. Value "1".
HEADER_TASK_FAILURE = "jobgate-task-failure"
PROBLEM_CONTENT_TYPE = "application/problem+json"
HEADER_TRACEPARENT = "traceparent"  # W3C trace context: on API requests, pushes and callbacks
HEADER_TRACESTATE = "tracestate"
# RFC 7240 on an enqueue: "Prefer: return=minimal" asks for a TaskReceipt per task instead of
# the whole Task; the answer says it did with "Preference-Applied: return=minimal".
HEADER_PREFER = "prefer"
HEADER_PREFERENCE_APPLIED = "preference-applied"
RETURN_MINIMAL = "return=minimal"

# Each format is written once, as the JSON Schema pattern openapi.yaml shows, and checked with
# fullmatch (a Python '$' would let a trailing newline through; the schema's does not).
QUEUE_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
TASK_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_.:-]{0,199}$"
ULID_PATTERN = r"^[0-7][0-9A-HJKMNP-TV-Za-hjkmnp-tv-z]{25}$"
CAPABILITY_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$"
KEY_PATTERN = r"^[\x21-\x7e]{1,256}$"
TRACEPARENT_PATTERN = r"^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$"
RFC3339_PATTERN = (
    r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?"
    r"([Zz]|[+-][0-9]{2}:[0-9]{2})$"
)


def _regex(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern.removeprefix("^").removesuffix("$"))


_QUEUE_NAME = _regex(QUEUE_NAME_PATTERN)
_TASK_NAME = _regex(TASK_NAME_PATTERN)
_ULID = _regex(ULID_PATTERN)
_CAPABILITY = _regex(CAPABILITY_PATTERN)
_KEY = _regex(KEY_PATTERN)
_RFC3339 = _regex(RFC3339_PATTERN)

MAX_PRIORITY = 1000
DAY = 86_400.0


def check_queue_name(name: str) -> str:
    """Check a queue name: 1 to 64 letters, digits, dots, underscores or dashes."""
    if not _QUEUE_NAME.fullmatch(name):
        raise ValueError(
            "must be 1-64 characters of letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return name


def _check_task_name(name: str) -> str:
    if not _TASK_NAME.fullmatch(name):
        raise ValueError(
            "must be 1-200 characters of letters, digits, '_', '.', ':' or '-', "
            "starting with a letter or '_'"
        )
    return name


def _check_ulid(value: str) -> str:
    if not _ULID.fullmatch(value):
        raise ValueError("must be a ULID: 26 Crockford base32 characters")
    return value.upper()


def _check_capability(value: str) -> str:
    if not _CAPABILITY.fullmatch(value):
        raise ValueError("must be 1-64 characters of letters, digits, '.', '_', ':' or '-'")
    return value


def _check_key(value: str) -> str:
    if not _KEY.fullmatch(value):
        raise ValueError("must be 1-256 printable ASCII characters without spaces")
    return value


def _timestamp(value: object) -> datetime:
    """A date-time with its timezone: an RFC 3339 string from JSON (pydantic alone would also
    take ``"0"`` or ``-1`` as 1970, or a date-time without an offset), or an aware ``datetime``
    from Python."""
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value
    if isinstance(value, str) and _RFC3339.fullmatch(value):
        try:
            return datetime.fromisoformat(value.upper())
        except ValueError as e:
            raise ValueError(f"is not a date-time: {e}") from e
    raise ValueError("must be an RFC 3339 date-time with a timezone, e.g. '2030-01-01T00:00:00Z'")


FINITE_JSON = "finite-json"
"""Validation context of a JSON document already known to hold finite numbers only (the
gateway parses each body with orjson first, which refuses NaN, Infinity and numbers too large
for a double): :data:`Json` values need no check of their own then."""


def _finite(value: JsonValue, info: ValidationInfo) -> JsonValue:
    """JSON has no NaN or Infinity (nor numbers too large for a double, which become
    Infinity): refuse them instead of storing null."""
    if info.context == FINITE_JSON:
        return value  # the whole document was checked, in a fraction of json.dumps's time
    try:
        json.dumps(value, allow_nan=False)
    except ValueError as e:
        raise ValueError("JSON has no NaN or Infinity") from e
    return value


def _pattern(pattern: str) -> Any:
    return Field(json_schema_extra={"pattern": pattern})


def matches(pattern: str, rule: str) -> Callable[[str], str]:
    """A validator of names: ``pattern`` (without its anchors, as :func:`_regex` reads it) must
    match the whole value, else ``rule`` says why. A name type is ``Annotated[str,
    AfterValidator(matches(PATTERN, rule)), _pattern(PATTERN)]``."""
    regex = _regex(pattern)

    def check(value: str) -> str:
        if not regex.fullmatch(value):
            raise ValueError(rule)
        return value

    return check


QueueName = Annotated[str, AfterValidator(check_queue_name), _pattern(QUEUE_NAME_PATTERN)]
TaskName = Annotated[str, AfterValidator(_check_task_name), _pattern(TASK_NAME_PATTERN)]
TaskId = Annotated[str, AfterValidator(_check_ulid), _pattern(ULID_PATTERN)]
Capability = Annotated[str, AfterValidator(_check_capability), _pattern(CAPABILITY_PATTERN)]
Key = Annotated[str, AfterValidator(_check_key), _pattern(KEY_PATTERN)]
GroupName = Annotated[str, AfterValidator(_check_capability), _pattern(CAPABILITY_PATTERN)]
Timestamp = Annotated[
    datetime,
    BeforeValidator(_timestamp),
    WithJsonSchema({"type": "string", "format": "date-time", "pattern": RFC3339_PATTERN}),
]


Json = Annotated[JsonValue, AfterValidator(_finite)]
"""Any JSON value (a payload, a result, a checkpoint), finite numbers only."""
Label = Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[\x21-\x7e]+$")]
Seconds = Annotated[float, Field(ge=0, le=365 * DAY)]
# An IPv6 address as RFC 4291 writes it (no zone id): eight groups, or fewer around one '::',
# the last two groups possibly an IPv4 address.
_H16 = "[0-9A-Fa-f]{1,4}"
_OCTET = "(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
_IPV4 = rf"(?:{_OCTET}\.){{3}}{_OCTET}"
_LS32 = f"(?:{_H16}:{_H16}|{_IPV4})"
IPV6_PATTERN = (
    "(?:"
    + "|".join(
        [
            f"(?:{_H16}:){{6}}{_LS32}",
            f"::(?:{_H16}:){{5}}{_LS32}",
            f"(?:{_H16})?::(?:{_H16}:){{4}}{_LS32}",
            f"(?:(?:{_H16}:){{0,1}}{_H16})?::(?:{_H16}:){{3}}{_LS32}",
            f"(?:(?:{_H16}:){{0,2}}{_H16})?::(?:{_H16}:){{2}}{_LS32}",
            f"(?:(?:{_H16}:){{0,3}}{_H16})?::{_H16}:{_LS32}",
            f"(?:(?:{_H16}:){{0,4}}{_H16})?::{_LS32}",
            f"(?:(?:{_H16}:){{0,5}}{_H16})?::{_H16}",
            f"(?:(?:{_H16}:){{0,6}}{_H16})?::",
        ]
    )
    + ")"
)
# An http(s) URL in printable ASCII (RFC 3986: other characters travel percent-encoded) with a
# host (a name of RFC 3986's reg-name characters, or an IPv6 address in brackets), a port of
# 0-65535 if any, no credentials (no '@' before the path) and no fragment: exactly what
# gateway.security.ssrf.parse_endpoint_url takes (a test holds the two equal). Whether the host
# resolves, and to allowed addresses, depends on the world. Written without \s, which
# ECMAScript, Python and Rust (pydantic) read differently.
WEB_URL_PATTERN = (
    rf"^https?://([A-Za-z0-9._~%!$&'()*+,;=-]+|\[{IPV6_PATTERN}\])"
    r"(:(6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5]?[0-9]{1,4}))?"
    r"([/?][!-\"$-~]*)?$"
)
WebUrl = Annotated[str, Field(min_length=8, max_length=2048, pattern=WEB_URL_PATTERN)]
"""A URL the gateway will POST to (an endpoint, a completion callback); checked against SSRF:
its host must resolve to addresses the gateway may push to (docs/security.md), else 422."""
PositiveSeconds = Annotated[float, Field(gt=0, le=365 * DAY)]


@functools.cache
def _integer_fields(model: type[BaseModel]) -> frozenset[str]:
    """The fields of ``model`` whose type is ``int`` or ``int | None``."""
    return frozenset(
        name
        for name, info in model.model_fields.items()
        if info.annotation is int or int in typing.get_args(info.annotation)
    )


class InputModel(BaseModel):
    """What a client sends: unknown fields are an error, not silently dropped; so are NaN and
    Infinity in float fields (see :data:`Json` for JSON values)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, defer_build=True)

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        """JSON Schema counts ``3.0`` as an integer: an integer field takes it as 3 (but never
        ``true`` or ``"3"``). Checked on the field's own value before its validation: a check
        of the whole input (a model validator, before) made pydantic build every object of
        a body as a Python dict first, about half of a batch's validation (bench/RESULTS.md,
        "Batch enqueue (issue 20, 2026-11-27)")."""
        super().__pydantic_init_subclass__(**kwargs)
        fields = _integer_fields(cls)
        for name in fields:
            metadata = cls.model_fields[name].metadata
            if _WHOLE not in metadata:
                metadata.append(_WHOLE)
        if fields and cls.__pydantic_complete__:  # built already (not deferred): again
            cls.model_rebuild(force=True)

    @classmethod
    def __get_pydantic_json_schema__(
        cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        """``additionalProperties: false`` where the model is read (validation mode: a request
        body); not where it is sent (serialization mode: a queue's policy in an answer), which
        a reader takes with fields it does not know."""
        schema = handler(core_schema)
        if handler.mode == "serialization":
            handler.resolve_ref_schema(schema).pop("additionalProperties", None)
        return schema


def _whole(value: Any) -> Any:
    """A float with no fraction as the int it is; anything else as it is (for the field's
    own validation to take or refuse)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


_WHOLE = BeforeValidator(_whole)


class OutputModel(BaseModel):
    """What a server sends: tolerant of fields added by newer servers, at every depth.

    An answer may hold an input model (a :class:`~sdk.wire.queues.Queue` holds the
    ``QueuePolicy`` it was created with): reading an answer validates in pydantic's
    ``extra="ignore"`` mode, which reaches every model inside it, so a field a newer server
    added to that input model is ignored too instead of refusing the whole answer. Passing
    ``extra`` explicitly still chooses (the gateway reads every request body with
    ``extra="forbid"``)."""

    model_config = ConfigDict(extra="ignore", defer_build=True)

    @classmethod
    def model_validate(cls, obj: Any, *, extra: ExtraValues | None = None, **options: Any) -> Self:
        return super().model_validate(obj, extra=extra or "ignore", **options)

    @classmethod
    def model_validate_json(
        cls, json_data: str | bytes | bytearray, *, extra: ExtraValues | None = None, **options: Any
    ) -> Self:
        return super().model_validate_json(json_data, extra=extra or "ignore", **options)


def build_models() -> int:
    """Build every wire model now rather than at its first use (they are declared with
    ``defer_build`` so that ``import sdk`` stays light). A long-lived server calls this at
    start, so no request pays for a build and the built schemas are in the startup heap it
    freezes (gateway/serving/gc_tuning.py). Returns how many were built."""
    built = 0
    waiting: list[type[BaseModel]] = [InputModel, OutputModel]
    while waiting:
        model = waiting.pop()
        waiting.extend(model.__subclasses__())
        if model not in (InputModel, OutputModel) and not model.__pydantic_complete__:
            model.model_rebuild()
            built += 1
    return built


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


def reason(error: ErrorDetails) -> str:
    """What one validation error says, in the words of the rule that refused it: pydantic puts
    "Value error, " before the message of a validator's ``ValueError`` (and "Assertion failed, "
    before an assertion's), which an answer or a command's message must not show."""
    message = error["msg"]
    if error["type"] == "value_error":
        return message.removeprefix("Value error, ")
    if error["type"] == "assertion_error":
        return message.removeprefix("Assertion failed, ")
    return message
