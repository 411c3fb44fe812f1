"""The admin UI's args fields, built from the catalog's schemas: which input each parameter
gets, which are required, how typed text becomes the payload, and when it falls back to JSON."""

from __future__ import annotations

from enum import Enum
from typing import Literal

from pydantic import BaseModel

from gateway.admin.argsform import Kind, Shape, fields_of, form_for, read_args
from sdk.catalog import payload_schema


class Colour(Enum):
    RED = "red"
    BLUE = "blue"


class Box(BaseModel):
    width: int


def resize(
    path: str,
    width: int,
    ratio: float = 1.5,
    colour: Colour = Colour.RED,
    mode: Literal["fit", "fill"] = "fit",
    note: str | None = None,
    box: Box | None = None,
    *,
    dry_run: bool,
) -> None: ...


def test_each_parameter_of_an_sdk_task_gets_the_input_of_its_type() -> None:
    shape, fields = fields_of(payload_schema(resize))
    assert shape is Shape.KWARGS
    got = {f.name: (f.kind, f.required, f.choices, f.default) for f in fields}
    assert got == {
        "path": (Kind.STRING, True, (), ""),
        "width": (Kind.INTEGER, True, (), ""),
        "ratio": (Kind.NUMBER, False, (), "1.5"),
        "colour": (Kind.CHOICE, False, ('"red"', '"blue"'), '"red"'),
        "mode": (Kind.CHOICE, False, ('"fit"', '"fill"'), '"fit"'),
        "note": (Kind.STRING, False, (), "null"),
        "box": (Kind.JSON, False, (), "null"),
        "dry_run": (Kind.BOOLEAN, True, ("true", "false"), ""),
    }


def test_typed_text_becomes_the_payload_and_empty_fields_are_left_out() -> None:
    shape, fields = fields_of(payload_schema(resize))
    typed = {
        "arg.path": " /tmp/a b.png",
        "arg.width": " 640 ",
        "arg.ratio": "2",
        "arg.colour": '"blue"',
        "arg.mode": "",
        "arg.note": "",
        "arg.box": '{"width": 3}',
        "arg.dry_run": "false",
    }
    payload, shown = read_args(shape, fields, typed)
    assert shown.problems == ()
    assert payload == {
        "kwargs": {
            "path": " /tmp/a b.png",  # strings are taken as typed
            "width": 640,
            "ratio": 2,
            "colour": "blue",
            "box": {"width": 3},
            "dry_run": False,
        }
    }


def test_text_that_does_not_parse_is_named_and_kept() -> None:
    shape, fields = fields_of(payload_schema(resize))
    typed = {"arg.width": "wide", "arg.ratio": "nan", "arg.box": "{width: 3}"}
    _, shown = read_args(shape, fields, typed)
    assert [(p.field, p.reason) for p in shown.problems] == [
        ("args.kwargs.width", "must be a whole number"),
        ("args.kwargs.ratio", "must be a number"),
        ("args.kwargs.box", "must be JSON (a string in double quotes)"),
    ]
    assert {f.name: f.value for f in shown.fields}["width"] == "wide"


def test_a_plain_object_schema_gives_fields_of_its_properties() -> None:
    schema = {
        "type": "object",
        "properties": {"url": {"type": "string"}, "retries": {"type": "integer"}},
        "required": ["url"],
    }
    shape, fields = fields_of(schema)
    assert shape is Shape.OBJECT
    assert [(f.name, f.required) for f in fields] == [("url", True), ("retries", False)]
    payload, _ = read_args(shape, fields, {"arg.url": "https://x.test", "arg.retries": "3"})
    assert payload == {"url": "https://x.test", "retries": 3}


def test_args_the_fields_cannot_show_are_shown_as_json() -> None:
    schema = payload_schema(resize)
    assert form_for(schema, {"kwargs": {"width": 3}}).shape is Shape.KWARGS
    assert form_for(schema, {"args": ["/a", 3]}).shape is Shape.JSON  # positional values
    assert form_for(schema, {"kwargs": {"nope": 1}}).shape is Shape.JSON  # unknown name
    assert form_for(schema, [1, 2]).shape is Shape.JSON
    assert form_for(schema, None, as_json=True).shape is Shape.JSON
    assert form_for(None, {"a": 1}).text == '{\n  "a": 1\n}'
    assert form_for({"type": "array"}, None).shape is Shape.JSON
    filled = form_for(schema, {"kwargs": {"width": 3, "path": "p", "dry_run": True}})
    assert {f.name: f.value for f in filled.fields if f.value} == {
        "path": "p",
        "width": "3",
        "dry_run": "true",
    }


def test_json_text_is_parsed_or_named() -> None:
    assert read_args(Shape.JSON, (), {"args_json": " "})[0] is None
    assert read_args(Shape.JSON, (), {"args_json": '{"a": [1]}'})[0] == {"a": [1]}
    _, shown = read_args(Shape.JSON, (), {"args_json": "{a}"})
    assert shown.problems[0].field == "args"
    assert shown.text == "{a}"


def test_json_that_nests_too_deep_or_holds_nan_is_a_problem_not_a_crash() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    for text in (deep, "NaN", '{"a": Infinity}'):
        _, shown = read_args(Shape.JSON, (), {"args_json": text})
        assert shown.problems[0].field == "args", text
        shape, fields = fields_of(payload_schema(resize))
        _, typed = read_args(shape, fields, {"arg.box": text})
        assert typed.problems[0].field == "args.kwargs.box", text
