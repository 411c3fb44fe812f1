"""Payload schemas derived from task functions' type hints (``sdk.catalog``), checked with a
real JSON Schema validator against the payloads ``@task`` producers send."""

from __future__ import annotations

import enum
from typing import Any, Literal

import jsonschema_rs
import pytest
from pydantic import BaseModel

from sdk import Context, Worker, task
from sdk.catalog import describe, payload_schema
from sdk.tasks import TaskFunction


class Size(BaseModel):
    width: int
    height: int = 100


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Opaque:
    """A type pydantic cannot describe."""


@task("img")
def resize(path: str, size: Size, color: Color | None = None, quality: int = 90) -> None:
    """Resize an image.

    Longer text that is not part of the catalog's description.
    """


@task("img")
def flags(
    ctx: Context, a: int, /, b: str = "x", *, c: Literal["on", "off"], d: bool = False
) -> None:
    pass


@task("img")
def varargs(first: int, *rest: float, **extra: str) -> None:
    pass


@task("other")
def untyped(anything, thing: Opaque, when: object = Opaque()) -> None:  # type: ignore[no-untyped-def]
    pass


@task("other")
def nothing() -> None:
    pass


def check(fn: TaskFunction[Any, Any], payload: Any) -> bool:
    return bool(jsonschema_rs.validator_for(describe(fn).payload_schema).is_valid(payload))


def sent(fn: TaskFunction[Any, Any], *args: Any, **kwargs: Any) -> Any:
    """The payload ``fn.delay(*args, **kwargs)`` sends."""
    return fn.create(args, kwargs).payload


def test_the_schema_is_a_valid_draft_2020_12_schema() -> None:
    for fn in (resize, flags, varargs, untyped, nothing):
        schema = describe(fn).payload_schema
        assert jsonschema_rs.meta.is_valid(schema), fn
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def test_int_str_model_enum_optional_and_defaults() -> None:
    schema = payload_schema(resize.fn)
    kwargs = schema["properties"]["kwargs"]["properties"]
    assert kwargs["path"] == {"type": "string"}
    assert kwargs["size"] == {"$ref": "#/$defs/Size"}
    assert schema["$defs"]["Size"]["required"] == ["width"]
    assert kwargs["quality"] == {"type": "integer", "default": 90}
    assert kwargs["color"]["default"] is None
    assert {"type": "null"} in kwargs["color"]["anyOf"]
    assert schema["$defs"]["Color"]["enum"] == ["red", "blue"]
    size = {"width": 3}
    assert check(resize, sent(resize, "a.png", size))
    assert check(resize, sent(resize, path="a.png", size=size, color="red", quality=5))
    assert check(resize, sent(resize, "a.png", size=size, color=None))
    assert not check(resize, sent(resize, "a.png", {"width": "3"}))
    assert not check(resize, sent(resize, "a.png", size, color="green"))
    assert not check(resize, sent(resize, 5, size))
    assert not check(resize, {"args": ["a.png"], "kwargs": {}})  # size is missing
    assert not check(resize, {"args": ["a.png"], "kwargs": {"path": "b", "size": size}})  # twice
    assert not check(resize, {"args": [], "kwargs": {"path": "a", "size": size, "zoom": 2}})
    assert not check(resize, {"args": ["a", size, None, 1, "extra"], "kwargs": {}})
    assert not check(resize, None)


def test_positional_only_keyword_only_and_ctx() -> None:
    schema = payload_schema(flags.fn)
    assert "ctx" not in schema["properties"]["kwargs"]["properties"]
    assert list(schema["properties"]["kwargs"]["properties"]) == ["b", "c", "d"]  # a: by position
    assert schema["properties"]["kwargs"]["required"] == ["c"]
    assert check(flags, sent(flags, 1, c="on"))
    assert check(flags, sent(flags, 1, "y", c="off", d=True))
    assert not check(flags, {"args": [], "kwargs": {"c": "on"}})  # a only by position
    assert not check(flags, {"args": [1], "kwargs": {"a": 1, "c": "on"}})
    assert not check(flags, {"args": [1], "kwargs": {}})  # c is keyword-only and required
    assert not check(flags, {"args": [1, "y", "on"], "kwargs": {}})
    assert not check(flags, {"args": [1], "kwargs": {"c": "maybe"}})


def test_var_positional_and_var_keyword() -> None:
    assert check(varargs, sent(varargs, 1, 2.5, 3, x="y"))
    assert check(varargs, sent(varargs, first=1))
    assert not check(varargs, {"args": [1, "no"], "kwargs": {}})
    assert not check(varargs, {"args": [1], "kwargs": {"x": 5}})


def test_untyped_and_undescribable_parameters_take_anything() -> None:
    kwargs = payload_schema(untyped.fn)["properties"]["kwargs"]["properties"]
    assert kwargs["anything"] == {}
    assert kwargs["thing"] == {}
    assert kwargs["when"] == {}  # its default is not JSON: not shown, still optional
    assert check(untyped, sent(untyped, [1], {"a": None}))
    assert not check(untyped, {"args": [1], "kwargs": {}})


def test_a_function_without_parameters_takes_null_or_nothing() -> None:
    assert check(nothing, None)
    assert check(nothing, sent(nothing))
    assert not check(nothing, {"args": [1], "kwargs": {}})
    assert not check(nothing, {"args": [], "kwargs": {"x": 1}})


def test_description_is_the_first_paragraph_of_the_docstring() -> None:
    assert describe(resize).description == "Resize an image."
    assert describe(nothing).description is None
    assert describe(resize).name == resize.name


def test_worker_catalog_lists_its_tasks_by_queue() -> None:
    worker = Worker(tasks=[resize, flags, untyped], secret="whsec_" + "A" * 44)
    assert [t.name for t in worker.catalog()] == [resize.name, flags.name, untyped.name]
    assert [t.name for t in worker.catalog("img")] == [resize.name, flags.name]
    assert worker.catalog("nope") == []
    wire = worker.catalog("img")[0].model_dump(mode="json")
    assert set(wire) == {"name", "schema", "description"}


@pytest.mark.parametrize("fn", [resize, flags, varargs, untyped, nothing])
def test_every_schema_fits_the_wire_limits(fn: TaskFunction[Any, Any]) -> None:
    from sdk.wire import EndpointTasks

    EndpointTasks.model_validate_json(
        EndpointTasks(tasks=[describe(fn)]).model_dump_json(), strict=True
    )


def test_a_type_that_cannot_be_resolved_leaves_only_its_parameter_unchecked() -> None:
    class Local(BaseModel):
        x: int

    @task("img", name="local")
    def local(size: Local, count: int) -> None:  # "Local" is a string: not resolvable here
        pass

    kwargs = payload_schema(local.fn)["properties"]["kwargs"]["properties"]
    assert kwargs["size"] == {}
    assert kwargs["count"] == {"type": "integer"}


def test_client_reports_and_lists_the_catalog() -> None:
    import json

    import httpx
    import respx

    from sdk import Client

    entry = {
        "queue": "img",
        "name": resize.name,
        "schema": {},
        "endpoints": [],
        "served": True,
        "updated_at": "2030-01-01T00:00:00Z",
    }
    with respx.mock(base_url="http://gw.test", assert_all_called=True) as gw:
        added = gw.post("/v1/queues/img/endpoints").respond(
            201,
            json={
                "id": "ep_1",
                "queue": "img",
                "url": "http://w/",
                "concurrency": 10,
                "capabilities": [],
                "enabled": True,
                "created_at": "2030-01-01T00:00:00Z",
                "secret": "whsec_x",
            },
        )
        put = gw.put("/v1/queues/img/endpoints/ep_1/tasks").respond(
            200, json={"queue": "img", "endpoint_id": "ep_1", "tasks": []}
        )
        pages = gw.get("/v1/tasks").mock(
            side_effect=[
                httpx.Response(200, json={"items": [entry], "next_cursor": "1"}),
                httpx.Response(200, json={"items": [entry], "next_cursor": None}),
            ]
        )
        worker = Worker(tasks=[resize], secret="whsec_" + "A" * 44)
        with Client("http://gw.test", "key", transport=httpx.HTTPTransport()) as client:
            client.add_endpoint("img", "http://w/", tasks=worker.catalog("img"))
            client.put_endpoint_tasks("img", "ep_1", [])
            listed = client.task_catalog(queue="img")
        sent = json.loads(added.calls[0].request.content)
        assert sent["tasks"][0]["name"] == resize.name
        assert sent["tasks"][0]["schema"] == describe(resize).payload_schema
        assert json.loads(put.calls[0].request.content) == {"tasks": []}
        assert [e.name for e in listed] == [resize.name, resize.name]
        assert pages.calls[1].request.url.params["cursor"] == "1"
        assert pages.calls[0].request.url.params["queue"] == "img"
