"""The names a refusal of an unknown task name suggests (gateway.services.catalog.closest)."""

from __future__ import annotations

import pytest

from gateway.services.catalog import closest, unknown_name

HELLO = ["tasks.greet", "tasks.slow_count"]


@pytest.mark.parametrize(
    ("name", "names", "expected"),
    [
        ("greet", HELLO, ["tasks.greet"]),  # the function's name for the SDK's module.function
        ("GREET", HELLO, ["tasks.greet"]),
        ("tasks.gret", HELLO, ["tasks.greet"]),
        # a shared module part does not make tasks.count look like tasks.greet
        ("tasks.count", HELLO, ["tasks.slow_count"]),
        ("other.greet", HELLO, ["tasks.greet"]),
        ("nothing_like_it", HELLO, []),
        (
            "resize",
            ["images.resize_all", "images.publish", "thumbs.resize", "images.resize"],
            ["images.resize", "thumbs.resize", "images.resize_all"],
        ),
        ("ab", [f"ab{i}" for i in range(10)], ["ab0", "ab1", "ab2"]),  # at most three
    ],
)
def test_closest(name: str, names: list[str], expected: list[str]) -> None:
    assert closest(name, names) == expected


def test_without_a_close_name_some_reported_ones_are_listed() -> None:
    names = [f"tasks.job_{i}" for i in range(8)]
    problem = unknown_name("q", "zzz", "name", names)
    assert problem.field == "name"
    assert problem.reason == (
        "no endpoint of queue 'q' reported a task named 'zzz'; they reported 'tasks.job_0', "
        "'tasks.job_1', 'tasks.job_2', 'tasks.job_3', 'tasks.job_4' and 3 more "
        "(GET /v1/tasks?queue=q)"
    )
