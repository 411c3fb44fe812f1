"""The gateway's HTTP API as request specs: what to send and how to read the answer.

Every route is a function returning a :class:`Call`; the sync and async clients only execute
calls, so the two cannot drift apart. Operations that need several requests (``wait``) are
*plans*: generators that yield calls and receive their parsed answers, driven the same way by
both clients. Nothing here does I/O.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeAlias, TypeVar
from urllib.parse import quote

from pydantic import BaseModel, ValidationError

from sdk.errors import ApiError, TaskTimeout, UnreadableAnswer
from sdk.wire import (
    HEADER_PREFER,
    RETURN_MINIMAL,
    BatchCreate,
    BatchCreated,
    BatchItem,
    BatchReceipt,
    CatalogEntry,
    CatalogPage,
    CatalogTask,
    Endpoint,
    EndpointCatalog,
    EndpointCreate,
    EndpointCreated,
    EndpointList,
    EndpointTasks,
    LeaseRequest,
    LogLine,
    LogPage,
    NotifySecret,
    Problem,
    PushBatch,
    Queue,
    QueueList,
    QueuePolicy,
    QueuePolicyPatch,
    SecretRotation,
    Task,
    TaskCreate,
    TaskPage,
    TaskReceipt,
    TaskState,
)
from sdk.wire.base import reason

if TYPE_CHECKING:
    from sdk.answers import Answer, Params

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)

MAX_WAIT = 60.0
"""The longest long-poll the gateway accepts on ``GET /v1/tasks/{id}?wait=``."""


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request: method, path (relative to the gateway URL), query, body, and the reader.

    ``wait`` is how long the server may hold the request (a long-poll); the client adds it to
    its read timeout. Nulls are left out of the body, except, with ``nulls``, the top-level
    fields explicitly set to None: a PATCH clears those; with ``lean``, so are fields at their
    default (where the gateway reads a field left out as its default: an enqueue's
    ``"priority": 0`` and ``"depends_on": []``, a third of a small task's JSON). ``headers``
    go with the client's own.
    """

    method: str
    path: str
    read: Callable[[Answer], T]
    params: Params | None = None
    body: BaseModel | None = None
    wait: float = 0.0
    nulls: bool = False
    headers: Mapping[str, str] | None = None
    lean: bool = False

    def content(self) -> bytes | None:
        if self.body is None:
            return None
        if self.lean:
            return self.body.model_dump_json(exclude_none=True, exclude_defaults=True).encode()
        if not self.nulls:
            return self.body.model_dump_json(exclude_none=True).encode()
        data = self.body.model_dump(mode="json", exclude_none=True)
        cleared = {k: None for k in self.body.model_fields_set if getattr(self.body, k) is None}
        return json.dumps({**data, **cleared}, separators=(",", ":")).encode()

    def answer(self, response: Answer) -> T:
        """The parsed answer, or :class:`ApiError` for a non-2xx status."""
        if not response.is_success:
            raise ApiError(response.status_code, problem_of(response))
        return self.read(response)


Plan: TypeAlias = Generator[Call[Any], Any, T]
"""A multi-request operation: yields calls, is sent each call's answer, returns the result."""


def problem_of(response: Answer) -> Problem:
    """The problem document of an error answer; made up from the status for non-JSON bodies."""
    try:
        return Problem.model_validate_json(response.content)
    except ValidationError:
        pass
    detail = response.text.strip()[:500] or None
    try:
        data = json.loads(response.content)
    except ValueError:
        data = None
    if isinstance(data, dict) and isinstance(data.get("detail"), str):
        detail = data["detail"]
    return Problem(
        title=response.reason_phrase or "Error", status=response.status_code, detail=detail
    )


# The errors of a value outside the ones the SDK knows: an enum's, a Literal's, a tagged
# union's tag (a job schedule's kind).
_UNKNOWN_VALUE = frozenset({"enum", "literal_error", "union_tag_invalid"})


def read_answer(model: type[M], content: bytes) -> M:
    """A success answer's JSON body as a ``model``: fields a newer gateway added are ignored at
    every depth (sdk/wire/base.py); anything else that does not fit, such as a task state this
    SDK does not know, raises :class:`~sdk.errors.UnreadableAnswer` naming each field."""
    try:
        return model.model_validate_json(content)
    except ValidationError as e:
        errors = e.errors(include_url=False)
        fields = [(".".join(map(str, err["loc"])), reason(err), err["input"]) for err in errors]
        unknown = any(err["type"] in _UNKNOWN_VALUE for err in errors)
        raise UnreadableAnswer(model.__name__, fields, unknown) from e


def reads(model: type[M]) -> Callable[[Answer], M]:
    """The reader of an answer whose JSON body is one ``model``."""

    def read(response: Answer) -> M:
        return read_answer(model, response.content)

    return read


def nothing(response: Answer) -> None:
    """The reader of an answer without a body (``204``)."""
    return None


def segment(value: str) -> str:
    """``value`` quoted as one path segment (a ``/`` in it cannot reach another route)."""
    return quote(value, safe="")


# --- queues -----------------------------------------------------------------------------------


def put_queue(name: str, policy: QueuePolicy) -> Call[Queue]:
    return Call("PUT", f"/v1/queues/{segment(name)}", reads(Queue), body=policy)


def patch_queue(name: str, patch: QueuePolicyPatch) -> Call[Queue]:
    return Call("PATCH", f"/v1/queues/{segment(name)}", reads(Queue), body=patch)


def get_queue(name: str) -> Call[Queue]:
    return Call("GET", f"/v1/queues/{segment(name)}", reads(Queue))


def queue_page(cursor: str | None = None, limit: int = 500) -> Call[QueueList]:
    """``GET /v1/queues``: one page of queues in name order."""
    params: Params = {"limit": limit} if cursor is None else {"limit": limit, "cursor": cursor}
    return Call("GET", "/v1/queues", reads(QueueList), params=params)


def list_queues(page_size: int = 500) -> Plan[list[Queue]]:
    """Every queue, page by page."""
    items: list[Queue] = []
    cursor = None
    while True:
        page: QueueList = yield queue_page(cursor, page_size)
        items.extend(page.items)
        if page.next_cursor is None:
            return items
        cursor = page.next_cursor


def delete_queue(name: str, force: bool = False) -> Call[None]:
    params: Params | None = {"force": "true"} if force else None
    return Call("DELETE", f"/v1/queues/{segment(name)}", nothing, params=params)


# --- endpoints --------------------------------------------------------------------------------


def add_endpoint(queue: str, endpoint: EndpointCreate) -> Call[EndpointCreated]:
    return Call(
        "POST", f"/v1/queues/{segment(queue)}/endpoints", reads(EndpointCreated), body=endpoint
    )


def rotate_secret(queue: str, endpoint_id: str, overlap: float) -> Call[EndpointCreated]:
    return Call(
        "POST",
        f"/v1/queues/{segment(queue)}/endpoints/{segment(endpoint_id)}/secret",
        reads(EndpointCreated),
        body=SecretRotation(overlap=overlap),
    )


def put_endpoint_tasks(
    queue: str, endpoint_id: str, tasks: Sequence[CatalogTask]
) -> Call[EndpointCatalog]:
    return Call(
        "PUT",
        f"/v1/queues/{segment(queue)}/endpoints/{segment(endpoint_id)}/tasks",
        reads(EndpointCatalog),
        body=EndpointTasks(tasks=list(tasks)),
    )


def catalog_page(
    queue: str | None = None, name: str | None = None, cursor: str | None = None, limit: int = 500
) -> Call[CatalogPage]:
    """``GET /v1/tasks``: one page of the task catalog."""
    given = {"queue": queue, "name": name, "cursor": cursor, "limit": limit}
    params = {k: v for k, v in given.items() if v is not None}
    return Call("GET", "/v1/tasks", reads(CatalogPage), params=params)


def task_catalog(queue: str | None = None, name: str | None = None) -> Plan[list[CatalogEntry]]:
    """Every page of the task catalog."""
    items: list[CatalogEntry] = []
    cursor = None
    while True:
        page: CatalogPage = yield catalog_page(queue, name, cursor)
        items.extend(page.items)
        if page.next_cursor is None:
            return items
        cursor = page.next_cursor


def list_endpoints(queue: str) -> Call[list[Endpoint]]:
    return Call(
        "GET",
        f"/v1/queues/{segment(queue)}/endpoints",
        lambda r: read_answer(EndpointList, r.content).items,
    )


def lease(queue: str, endpoint_id: str, max_tasks: int, wait: float) -> Call[list[BatchItem]]:
    """``POST /v1/queues/{queue}/leases``: tasks for a pull endpoint, waiting up to ``wait``."""
    return Call(
        "POST",
        f"/v1/queues/{segment(queue)}/leases",
        lambda r: read_answer(PushBatch, r.content).tasks,
        body=LeaseRequest(endpoint_id=endpoint_id, max_tasks=max_tasks, wait=wait),
        wait=wait,
    )


def delete_endpoint(queue: str, endpoint_id: str) -> Call[None]:
    return Call("DELETE", f"/v1/queues/{segment(queue)}/endpoints/{segment(endpoint_id)}", nothing)


# --- tasks ------------------------------------------------------------------------------------


def _wait(wait: float) -> tuple[float, dict[str, str]]:
    """A long poll's wait, bounded to :data:`MAX_WAIT`, and its query parameter."""
    wait = min(max(float(wait), 0.0), MAX_WAIT)
    return wait, {"wait": f"{wait:.3f}".rstrip("0").rstrip(".")}  # "60", "12.5", "0"


def enqueue(queue: str, task: TaskCreate, wait: float | None = None) -> Call[Task]:
    """``POST /v1/queues/{queue}/tasks``; with ``wait``, the answer comes once the task has
    finished or ``wait`` seconds have passed (the task as it stands then)."""
    path = f"/v1/queues/{segment(queue)}/tasks"
    if wait is None:
        return Call("POST", path, reads(Task), body=task)
    wait, params = _wait(wait)
    return Call("POST", path, reads(Task), body=task, params=params, wait=wait)


def enqueue_batch(queue: str, tasks: list[TaskCreate]) -> Call[list[Task]]:
    return Call(
        "POST",
        f"/v1/queues/{segment(queue)}/tasks/batch",
        lambda r: read_answer(BatchCreated, r.content).tasks,
        body=BatchCreate(tasks=tasks),
        lean=True,
    )


MINIMAL = {HEADER_PREFER: RETURN_MINIMAL}
"""Asks an enqueue for a :class:`TaskReceipt` per task, not the whole Task (RFC 7240). A
gateway that ignores it answers whole Tasks, which read as receipts too (the extra fields are
ignored): about 700 bytes less per task to write and to read."""


def enqueue_receipt(queue: str, task: TaskCreate) -> Call[TaskReceipt]:
    """:func:`enqueue` answered with the task's id, state and ``deduplicated`` only."""
    path = f"/v1/queues/{segment(queue)}/tasks"
    return Call("POST", path, reads(TaskReceipt), body=task, headers=MINIMAL)


def enqueue_batch_receipts(queue: str, tasks: list[TaskCreate]) -> Call[list[TaskReceipt]]:
    """:func:`enqueue_batch` answered with a :class:`TaskReceipt` per task."""
    return Call(
        "POST",
        f"/v1/queues/{segment(queue)}/tasks/batch",
        lambda r: read_answer(BatchReceipt, r.content).tasks,
        body=BatchCreate(tasks=tasks),
        headers=MINIMAL,
        lean=True,
    )


def list_tasks(
    queue: str,
    state: TaskState | None = None,
    limit: int | None = None,
    cursor: str | None = None,
    owner: str | None = None,
) -> Call[TaskPage]:
    """``GET /v1/queues/{queue}/tasks``: one state's tasks (queued by default), optionally
    only those of one ``owner``."""
    params: dict[str, str | int] = {}
    if state is not None:
        params["state"] = TaskState(state).value
    if owner is not None:
        params["owner"] = owner
    if limit is not None:
        params["limit"] = limit
    if cursor is not None:
        params["cursor"] = cursor
    return Call("GET", f"/v1/queues/{segment(queue)}/tasks", reads(TaskPage), params=params)


def get_task(task_id: str, wait: float | None = None) -> Call[Task]:
    """``GET /v1/tasks/{id}``; with ``wait``, the server holds the answer until the task has
    finished or ``wait`` seconds (at most :data:`MAX_WAIT`) have passed."""
    if wait is None:
        return Call("GET", f"/v1/tasks/{segment(task_id)}", reads(Task))
    wait, params = _wait(wait)
    return Call("GET", f"/v1/tasks/{segment(task_id)}", reads(Task), params=params, wait=wait)


def cancel(task_id: str) -> Call[Task]:
    return Call("POST", f"/v1/tasks/{segment(task_id)}/cancel", reads(Task))


def logs(task_id: str) -> Call[list[LogLine]]:
    """The task's log lines kept by the gateway (its last 10,000 by default), in one page."""
    return Call(
        "GET",
        f"/v1/tasks/{segment(task_id)}/logs",
        lambda r: read_answer(LogPage, r.content).items,
        params={"limit": 10_000},
    )


def notify_secret(queue: str) -> Call[str]:
    return Call(
        "GET",
        f"/v1/queues/{segment(queue)}/notify-secret",
        lambda r: read_answer(NotifySecret, r.content).secret,
    )


def rotate_notify_secret(queue: str, overlap: float) -> Call[NotifySecret]:
    return Call(
        "POST",
        f"/v1/queues/{segment(queue)}/notify-secret",
        reads(NotifySecret),
        body=SecretRotation(overlap=overlap),
    )


def wait(task_id: str, timeout: float, clock: Callable[[], float] = time.monotonic) -> Plan[Task]:
    """Long-poll a task until it has finished; :class:`TaskTimeout` after ``timeout`` seconds.

    Each poll asks the server to wait for the rest of the time (at most :data:`MAX_WAIT`), so
    a finished task is seen at once and an unfinished one costs one request a minute.
    """
    deadline = clock() + timeout
    while True:
        task: Task = yield get_task(task_id, wait=max(deadline - clock(), 0.0))
        if task.state.finished:
            return task
        if clock() >= deadline:
            raise TaskTimeout(task_id, timeout, task)
