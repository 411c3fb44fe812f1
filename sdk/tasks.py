"""``@task``: a function that can be called here or enqueued to run on a worker.

::

    @task("emails")
    def send_welcome(user_id: int) -> None: ...

    send_welcome(7)                    # runs it here and now
    handle = send_welcome.delay(7)     # enqueues {"args": [7], "kwargs": {}} on queue "emails"
    handle.result(timeout=30)          # long-polls until it has run
    send_welcome.apply([7], delay=60, dedup_key="welcome-7", depends_on=[handle])
    group(send_welcome.s(1), send_welcome.s(2)).delay()   # see sdk.groups

A task function that declares ``ctx`` (as its first parameter, for exact typing) gets a
:class:`~sdk.context.Context` (or :class:`~sdk.context.AsyncContext` when ``async def``); called
directly, it gets a detached one whose calls stay in the process.
"""

from __future__ import annotations

import inspect
import threading
import weakref
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Concatenate, Generic, ParamSpec, TypeVar, Unpack, overload

from sdk import lazy
from sdk.binding import Signature
from sdk.client import AsyncClient, Client
from sdk.groups import TaskSignature
from sdk.handles import AsyncTaskHandle, TaskHandle
from sdk.options import EnqueueOptions

if TYPE_CHECKING:
    import asyncio

    from sdk import context, wire
    from sdk.context import AsyncContext, Context
    from sdk.wire import TaskCreate
else:  # loaded on first use: `from sdk import task` stays light (sdk/lazy.py)
    asyncio = lazy.module("asyncio")
    context = lazy.module("sdk.context")
    wire = lazy.module("sdk.wire")

__all__ = ["AsyncTaskHandle", "EnqueueOptions", "TaskFunction", "TaskHandle", "task"]

P = ParamSpec("P")
R = TypeVar("R")


def _checked_queue(name: str) -> str:
    try:
        return wire.check_queue_name(name)
    except ValueError as e:
        raise ValueError(f"queue name {name!r} {e}") from e


def default_name(fn: Callable[..., Any]) -> str:
    """``module.qualname``, without the ``<locals>`` of functions defined in functions."""
    qualname = fn.__qualname__.replace("<locals>.", "")
    return f"{fn.__module__}.{qualname}"


class TaskFunction(Generic[P, R]):
    """A function registered as a task of ``queue`` under ``name``.

    ``P`` are the parameters producers pass (without ``ctx``), ``R`` what a direct call returns.
    The client used to enqueue is the one given to :func:`task`, else the one bound with
    :meth:`using`, else one made from the environment (``Client.from_env()``) on first use.
    """

    def __init__(
        self,
        fn: Callable[..., R],
        *,
        queue: str,
        name: str | None = None,
        client: Client | None = None,
        async_client: AsyncClient | None = None,
        inline: bool = True,
        defaults: Mapping[str, Any] | None = None,
    ) -> None:
        self.fn = fn
        self.queue = _checked_queue(queue)
        self.name = name or default_name(fn)
        self.inline = inline
        # An async generator runs on the event loop too: each value it yields is progress, the
        # last one its result (sdk.attempt).
        self.is_generator = inspect.isasyncgenfunction(fn)
        self.is_async = inspect.iscoroutinefunction(fn) or self.is_generator
        self.signature = Signature.of(fn)
        self.defaults = dict(defaults or {})
        wire.TaskCreate(name=self.name, **self.defaults)  # fail at decoration, not at first enqueue
        self._client = client
        self._async_client = async_client
        self._lock = threading.Lock()
        self._env_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, AsyncClient]
        self._env_clients = weakref.WeakKeyDictionary()
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        """Run the function here, now; a ``ctx`` it declares is a detached context."""
        if not self.signature.takes_context:
            return self.fn(*args, **kwargs)
        info = context.TaskInfo(id="local", name=self.name, queue=self.queue)
        ctx = (
            context.AsyncContext(info, context.DetachedChannel())
            if self.is_async
            else context.Context(info, context.DetachedChannel())
        )
        call_args, call_kwargs = self.signature.layout(args, kwargs, ctx)
        return self.fn(*call_args, **call_kwargs)

    def using(self, client: Client | AsyncClient) -> TaskFunction[P, R]:
        """This task function, enqueuing through ``client``."""
        sync = client if isinstance(client, Client) else self._client
        aio = client if isinstance(client, AsyncClient) else self._async_client
        return TaskFunction(
            self.fn,
            queue=self.queue,
            name=self.name,
            client=sync,
            async_client=aio,
            inline=self.inline,
            defaults=self.defaults,
        )

    def create(
        self,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        **options: Unpack[EnqueueOptions],
    ) -> TaskCreate:
        """The enqueue request :meth:`apply` sends; also for ``Client.enqueue_batch``.

        Raises ``TypeError`` when the arguments do not fit the function's signature.
        """
        kwargs = dict(kwargs or {})
        self.signature.check(args, kwargs)
        given: dict[str, Any] = dict(options)
        given["id"] = given.pop("task_id", None)
        depends_on = given.pop("depends_on", None)
        if depends_on:
            given["depends_on"] = [d if isinstance(d, str) else d.id for d in depends_on]
        chosen = {**self.defaults, **{k: v for k, v in given.items() if v is not None}}
        # The TaskArgs shape, checked as JSON by TaskCreate's payload field (one validation).
        payload = {"args": list(args), "kwargs": kwargs}
        return wire.TaskCreate.model_validate({"name": self.name, "payload": payload, **chosen})

    def s(self, *args: P.args, **kwargs: P.kwargs) -> TaskSignature:
        """A run of this task with these arguments, to enqueue later: a member of a
        :func:`~sdk.groups.group`, or ``.delay()`` on its own. Its ``.set(**options)`` adds
        enqueue options. The arguments are checked now (``TypeError``), unless they fit after
        one more first argument: then the run takes a previous task's result there, as a link
        of :func:`~sdk.chains.chain` or a chord's callback."""
        try:
            self.signature.check(args, kwargs)
        except TypeError as e:
            try:
                self.signature.check((None, *args), kwargs)
            except TypeError:
                raise e from None
            return TaskSignature(self, tuple(args), dict(kwargs), needs_result=str(e))
        return TaskSignature(self, tuple(args), dict(kwargs))

    def delay(self, *args: P.args, **kwargs: P.kwargs) -> TaskHandle:
        """Enqueue a run with these arguments."""
        return self.apply(args, kwargs)

    def apply(
        self,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        *,
        wait: float | None = None,
        **options: Unpack[EnqueueOptions],
    ) -> TaskHandle:
        """Enqueue a run with options; ``delay`` / ``run_at`` postpone it. With ``wait``
        (seconds, at most 60) the gateway answers once the run has finished, so a following
        ``.result()`` needs no request of its own."""
        body = self.create(args, kwargs, **options)
        client = self.client()
        if wait is None:  # the handle needs the id and state only: a receipt
            return TaskHandle(client.enqueue_receipt(self.queue, body), client)
        return TaskHandle(client.enqueue_task(self.queue, body, wait=wait), client)

    async def delay_async(self, *args: P.args, **kwargs: P.kwargs) -> AsyncTaskHandle:
        """:meth:`delay` through an :class:`~sdk.client.AsyncClient`."""
        return await self.apply_async(args, kwargs)

    async def apply_async(
        self,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        *,
        wait: float | None = None,
        **options: Unpack[EnqueueOptions],
    ) -> AsyncTaskHandle:
        """:meth:`apply` through an :class:`~sdk.client.AsyncClient`."""
        body = self.create(args, kwargs, **options)
        client = self.async_client()
        if wait is None:
            return AsyncTaskHandle(await client.enqueue_receipt(self.queue, body), client)
        return AsyncTaskHandle(await client.enqueue_task(self.queue, body, wait=wait), client)

    def client(self) -> Client:
        """The client this task function enqueues through (see the class docstring)."""
        if self._client is not None:
            return self._client
        with self._lock:
            if self._client is None:
                self._client = Client.from_env()
            return self._client

    def async_client(self) -> AsyncClient:
        """The async client: the bound one, else one from the environment per event loop."""
        if self._async_client is not None:
            return self._async_client
        loop = asyncio.get_running_loop()
        client = self._env_clients.get(loop)
        if client is None:
            client = self._env_clients[loop] = AsyncClient.from_env()
        return client

    def __repr__(self) -> str:
        return f"<TaskFunction {self.name} on {self.queue!r}>"


class _Decorator:
    def __init__(self, queue: str, options: dict[str, Any]) -> None:
        self.queue = queue
        self.options = options

    @overload
    def __call__(
        self, fn: Callable[Concatenate[AsyncContext, P], Coroutine[Any, Any, R]]
    ) -> TaskFunction[P, Coroutine[Any, Any, R]]: ...

    @overload
    def __call__(self, fn: Callable[Concatenate[Context, P], R]) -> TaskFunction[P, R]: ...

    @overload
    def __call__(self, fn: Callable[P, R]) -> TaskFunction[P, R]: ...

    def __call__(self, fn: Callable[..., Any]) -> TaskFunction[Any, Any]:
        return TaskFunction(fn, queue=self.queue, **self.options)


def task(
    queue: str,
    *,
    name: str | None = None,
    client: Client | None = None,
    async_client: AsyncClient | None = None,
    inline: bool = True,
    priority: int | None = None,
    max_attempts: int | None = None,
    lease_timeout: float | None = None,
    max_run_time: float | None = None,
    max_heartbeat_interval: float | None = None,
    capability: str | None = None,
    version: str | None = None,
) -> _Decorator:
    """Make a function a task of ``queue``.

    ``name`` defaults to ``module.qualname``. ``inline=False`` makes workers always answer
    pushes with 202 and report through callbacks. ``priority``, ``max_attempts``,
    ``lease_timeout``, ``max_run_time``, ``max_heartbeat_interval``, ``capability`` (only
    endpoints advertising it get the task) and ``version`` (of the task's code) are defaults
    for every enqueue of this task.
    """
    given = {
        "priority": priority,
        "max_attempts": max_attempts,
        "lease_timeout": lease_timeout,
        "max_run_time": max_run_time,
        "max_heartbeat_interval": max_heartbeat_interval,
        "capability": capability,
        "version": version,
    }
    defaults = {k: v for k, v in given.items() if v is not None}
    _checked_queue(queue)
    options = {
        "name": name,
        "client": client,
        "async_client": async_client,
        "inline": inline,
        "defaults": defaults,
    }
    return _Decorator(queue, options)
