"""docs/configuration.md names every setting and policy field, with its default."""

from __future__ import annotations

from pathlib import Path

from gateway.settings import Settings
from sdk.wire import Backoff, CircuitBreaker, QueuePolicy

DOC = (Path(__file__).parents[2] / "docs" / "configuration.md").read_text()


def test_every_setting_is_documented_with_its_env_var_and_default() -> None:
    for name, field in Settings.model_fields.items():
        default = field.default_factory() if field.default_factory else field.default  # type: ignore[call-arg]
        shown = "(none)" if default is None else f"`{default}`"
        row = f"| `{name}` | `JOBGATE_{name.upper()}` | {shown} |"
        assert row in DOC, f"docs/configuration.md lacks the row for {name}: {row}"


def test_every_policy_field_is_documented() -> None:
    nested = {"backoff": Backoff, "circuit_breaker": CircuitBreaker}
    for name in QueuePolicy.model_fields:
        if name not in nested:
            assert f"| `{name}` |" in DOC, name
    for prefix, model in nested.items():
        for name in model.model_fields:
            assert f"| `{prefix}.{name}` |" in DOC, f"{prefix}.{name}"
