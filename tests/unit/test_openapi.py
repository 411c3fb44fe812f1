"""The committed openapi.yaml is what the code generates, and it describes every route."""

from __future__ import annotations

from pathlib import Path

from gateway.api import OPERATIONS
from gateway.api.openapi import build_openapi, openapi_yaml

COMMITTED = Path(__file__).parents[2] / "openapi.yaml"


def test_committed_openapi_is_current() -> None:
    assert COMMITTED.read_text() == openapi_yaml(), (
        "openapi.yaml is stale: run 'make openapi' (jobgate openapi --output openapi.yaml)"
    )


def test_every_operation_is_documented_with_problem_responses() -> None:
    doc = build_openapi()
    for op in OPERATIONS:
        entry = doc["paths"][op.path][op.method.lower()]
        assert entry["operationId"] == op.operation_id
        for status in op.errors:
            content = entry["responses"][str(status)]["content"]
            assert "application/problem+json" in content
    ids = [op.operation_id for op in OPERATIONS]
    assert len(ids) == len(set(ids)), "operation ids must be unique"


def test_every_operation_declares_the_answers_every_route_can_give() -> None:
    """A target holding a '#' is 400 on every route (gateway/api/target.py); an error of its
    own problem type is named under its status."""
    doc = build_openapi()
    for op in OPERATIONS:
        responses = doc["paths"][op.path][op.method.lower()]["responses"]
        assert "400" in responses, (op.method, op.path)
        for problem in op.problems:
            assert problem.problem_type in responses[str(problem.status)]["description"]
