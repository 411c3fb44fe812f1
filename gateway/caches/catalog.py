"""The task catalog as the enqueue path sees it: each queue's cataloged names with their
compiled schemas, cached like :mod:`gateway.caches.directory`.

An enqueue of a name nobody reported costs one dictionary lookup in the queue's cached view. A
change made through this gateway (an endpoint registered, re-reported or deleted, the queue
deleted) drops the queue's entry at once; one made through another gateway is seen within
``ttl`` seconds: when an entry goes stale, one refresh runs while enqueues keep using it.

Schemas are compiled once (``jsonschema_rs``, offline: a ``$ref`` is never fetched) and kept by
their canonical JSON, so a refresh that finds the same schemas compiles nothing.

Which schema a name is checked against, when several endpoints report it: the one reported
most recently by an enabled endpoint (by any endpoint, when none is enabled).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import jsonschema_rs

from gateway.core.errors import FieldProblem
from gateway.store.catalog import CatalogStore, StoredCatalog
from gateway.store.endpoint_records import EndpointRecord

log = logging.getLogger(__name__)

MAX_PROBLEMS = 20
"""Most field problems reported for one payload."""
MAX_REASON = 200
"""Longest reason text (a validator's message quotes the value, which may be large)."""


def canonical(schema: Any) -> str:
    return json.dumps(schema, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def compile_schema(schema: dict[str, Any]) -> jsonschema_rs.Validator:
    """A validator for ``schema``; ``ValueError`` saying why when it is not a usable JSON
    Schema (not valid against its meta-schema, or a ``$ref`` outside itself)."""
    try:
        jsonschema_rs.meta.validate(schema)
    except jsonschema_rs.ValidationError as e:
        where = "/".join(str(p) for p in e.instance_path)
        raise ValueError(
            f"is not a valid JSON Schema{f' at {where}' if where else ''}: {_short(e.message)}"
        ) from e
    except jsonschema_rs.ReferencingError as e:
        raise ValueError(f"is not a JSON Schema this gateway knows: {_short(str(e))}") from e
    try:
        return jsonschema_rs.validator_for(schema, offline=True)
    except (jsonschema_rs.ValidationError, jsonschema_rs.ReferencingError, ValueError) as e:
        raise ValueError(f"cannot be used: {_short(str(e).splitlines()[0])}") from e


@dataclass(frozen=True, slots=True)
class Reported:
    """One endpoint's reported list, parsed."""

    at_ms: int
    tasks: tuple[dict[str, Any], ...]


@dataclass(frozen=True, slots=True)
class CatalogedTask:
    """One name of one queue: the schema enqueues are checked against, and who serves it."""

    name: str
    schema: dict[str, Any]
    description: str | None
    endpoints: tuple[str, ...]  # ids of the endpoints that reported it, newest report first
    served: bool  # some enabled endpoint reported it
    schemas_differ: bool
    updated_ms: int
    validator: jsonschema_rs.Validator | None  # None: the schema could not be compiled

    def problems(self, payload: Any, prefix: str = "payload") -> list[FieldProblem]:
        """What is wrong with ``payload``, each named by its path (``payload.kwargs.width``)."""
        if self.validator is None or self.validator.is_valid(payload):
            return []
        found: list[FieldProblem] = []
        for error in self.validator.iter_errors(payload):
            found.extend(_problems(error, self.schema, prefix))
            if len(found) >= MAX_PROBLEMS:
                break
        return found[:MAX_PROBLEMS]


@dataclass(frozen=True, slots=True)
class CatalogView:
    tasks: dict[str, CatalogedTask]
    endpoints: dict[str, EndpointRecord]
    reported: dict[str, tuple[str, Reported]]  # endpoint id -> (raw, parsed)
    read_at: float


class Catalog:
    def __init__(self, store: CatalogStore, ttl: float = 1.0, compiled: int = 4096) -> None:
        self._store = store
        self._ttl = ttl
        self._max_compiled = compiled
        self._views: dict[str, CatalogView] = {}
        self._loading: dict[str, asyncio.Future[CatalogView]] = {}
        # Every read under way, forgotten ones too, so that close() can wait for them all.
        self._reads: set[asyncio.Future[CatalogView]] = set()
        self._compiled: OrderedDict[str, jsonschema_rs.Validator | None] = OrderedDict()

    def forget(self, queue: str) -> None:
        """Drop what is known of the queue, including a read begun before the change."""
        self._views.pop(queue, None)
        self._loading.pop(queue, None)

    async def close(self) -> None:
        """Stop the reads under way (background refreshes), before Redis is closed."""
        loading = list(self._reads)
        self._loading.clear()
        for future in loading:
            future.cancel()
        await asyncio.gather(*loading, return_exceptions=True)

    def cached_names(self, queue: str) -> Collection[str]:
        """The queue's cataloged names as cached, however old, without reading Redis (none
        when nothing is cached): for metrics, which must not wait on the hot path."""
        view = self._views.get(queue)
        return () if view is None else view.tasks

    async def view(self, queue: str) -> CatalogView:
        """The queue's catalog, from the cache (refreshed in the background when stale)."""
        view = self._views.get(queue)
        if view is None:
            return await self._load(queue)
        if time.monotonic() - view.read_at > self._ttl and queue not in self._loading:
            self._load(queue)  # starts a refresh; this call goes on with the old entry
        return view

    async def fresh(self, queue: str) -> CatalogView:
        """The queue's catalog read now (listings), kept for the enqueues after it."""
        self.forget(queue)
        return await self._load(queue)

    def _load(self, queue: str) -> asyncio.Future[CatalogView]:
        loading = self._loading.get(queue)
        if loading is None:
            loading = self._loading[queue] = asyncio.ensure_future(self._read(queue))
            self._reads.add(loading)
            loading.add_done_callback(self._read_done)
        return loading

    def _read_done(self, read: asyncio.Future[CatalogView]) -> None:
        self._reads.discard(read)
        # A background refresh has no one awaiting it: its failure (Redis unreachable) is
        # logged here, not left for asyncio to report as never retrieved.
        if not read.cancelled() and (error := read.exception()) is not None:
            log.warning("reading a queue's task catalog failed: %s", error)

    async def _read(self, queue: str) -> CatalogView:
        me = asyncio.current_task()
        try:
            stored = await self._store.read(queue)
            view = self._build(stored, self._views.get(queue))
            if self._loading.get(queue) is me:  # not forgotten meanwhile
                self._views[queue] = view
            return view
        finally:
            if self._loading.get(queue) is me:
                del self._loading[queue]

    def _build(self, stored: StoredCatalog, previous: CatalogView | None) -> CatalogView:
        reported: dict[str, tuple[str, Reported]] = {}
        for endpoint_id, raw in stored.reported.items():
            known = previous.reported.get(endpoint_id) if previous else None
            if known is not None and known[0] == raw:
                reported[endpoint_id] = known
            else:
                decoded = json.loads(raw)
                reported[endpoint_id] = (raw, Reported(int(decoded["at"]), tuple(decoded["tasks"])))
        tasks = {
            name: self._task(name, offers, stored.endpoints)
            for name, offers in _by_name(reported).items()
        }
        return CatalogView(tasks, stored.endpoints, reported, time.monotonic())

    def _task(
        self,
        name: str,
        offers: list[tuple[str, int, dict[str, Any]]],
        endpoints: dict[str, EndpointRecord],
    ) -> CatalogedTask:
        def enabled(endpoint_id: str) -> bool:
            record = endpoints.get(endpoint_id)
            return record is not None and record.enabled

        # newest report first; an enabled endpoint's report before any disabled one's
        offers.sort(key=lambda o: (not enabled(o[0]), -o[1], o[0]))
        chosen = offers[0][2]
        schema = chosen["schema"]
        key = canonical(schema)
        return CatalogedTask(
            name=name,
            schema=schema,
            description=chosen.get("description"),
            endpoints=tuple(o[0] for o in offers),
            served=any(enabled(o[0]) for o in offers),
            schemas_differ=any(canonical(o[2]["schema"]) != key for o in offers[1:]),
            updated_ms=max(o[1] for o in offers),
            validator=self._compile(key, schema),
        )

    def _compile(self, key: str, schema: dict[str, Any]) -> jsonschema_rs.Validator | None:
        if key in self._compiled:
            self._compiled.move_to_end(key)
            return self._compiled[key]
        try:
            validator: jsonschema_rs.Validator | None = compile_schema(schema)
        except ValueError as e:  # checked when reported; a stored one that fails is not used
            log.warning("a cataloged schema cannot be compiled, so it is not checked: %s", e)
            validator = None
        self._compiled[key] = validator
        if len(self._compiled) > self._max_compiled:
            self._compiled.popitem(last=False)
        return validator


def _by_name(
    reported: dict[str, tuple[str, Reported]],
) -> dict[str, list[tuple[str, int, dict[str, Any]]]]:
    by_name: dict[str, list[tuple[str, int, dict[str, Any]]]] = {}
    for endpoint_id, (_, parsed) in reported.items():
        for task in parsed.tasks:
            by_name.setdefault(task["name"], []).append((endpoint_id, parsed.at_ms, task))
    return by_name


def _short(text: str) -> str:
    return text if len(text) <= MAX_REASON else text[: MAX_REASON - 1] + "…"


def _dotted(prefix: str, path: Iterable[str | int]) -> str:
    return prefix + "".join(f".{part}" for part in path)


def _subschema(schema: Any, path: Sequence[str | int]) -> Any:
    for part in path:
        if isinstance(schema, dict) and isinstance(part, str):
            schema = schema.get(part)
        elif isinstance(schema, list) and isinstance(part, int) and part < len(schema):
            schema = schema[part]
        else:
            return None
    return schema


def _problems(
    error: jsonschema_rs.ValidationError, schema: dict[str, Any], prefix: str
) -> list[FieldProblem]:
    at = _dotted(prefix, error.instance_path)
    kind = error.kind.name
    details = error.kind.as_dict()
    if kind == "required":
        missing = str(details["property"])
        # A rule that requires an object *and* fields in it (how SDK schemas say "this
        # argument, by name, unless it came positionally") names the inner fields.
        rule = _subschema(schema, list(error.schema_path)[:-1])
        inner = _subschema(rule, ["properties", missing, "required"])
        if isinstance(inner, list) and inner:
            return [FieldProblem(f"{at}.{missing}.{field}", "is required") for field in inner]
        return [FieldProblem(f"{at}.{missing}", "is required")]
    if kind == "additionalProperties":
        unexpected = details.get("unexpected") or []
        return [FieldProblem(f"{at}.{name}", "is not an accepted field") for name in unexpected]
    if kind == "falseSchema":
        return [FieldProblem(at, "is not allowed here")]
    return [FieldProblem(at, _short(error.message))]
