"""The gateway builds every wire model at start (sdk.wire.base.build_models), not at the first
request that needs one: the models are declared with ``defer_build`` for the SDK's import."""

from __future__ import annotations

import json
import subprocess
import sys

SCRIPT = """
import json
import pydantic
import sdk.wire
from sdk.wire.base import build_models

BASES = ("InputModel", "OutputModel")  # abstract: never validated themselves

def models():
    waiting = [pydantic.BaseModel]
    while waiting:
        model = waiting.pop()
        waiting.extend(model.__subclasses__())
        if model.__module__.startswith("sdk.wire") and model.__name__ not in BASES:
            yield model

before = sorted(m.__name__ for m in models() if not m.__pydantic_complete__)
built = build_models()
after = sorted(m.__name__ for m in models() if not m.__pydantic_complete__)
print(json.dumps({"before": before, "built": built, "after": after}))
"""


def test_every_deferred_wire_model_is_built_at_once() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=True
    )
    found = json.loads(done.stdout.splitlines()[-1])
    assert found["before"], "the wire models are no longer deferred: this test is moot"
    assert found["after"] == []
