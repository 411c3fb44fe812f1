"""Each Lua script carries the helpers it uses (and only those): a helper missing from a
script would fail only when the branch calling it runs."""

from __future__ import annotations

import re

from gateway.store.scripts import SCRIPT_NAMES, _definitions, _read, _source

HELPER_FILES = (
    "wait_helpers",
    "ready",
    "prelude",
    "due_helpers",
    "key_limits",
    "resume_helpers",
    "health",
    "job_helpers",
)


def test_every_helper_a_script_calls_is_defined_in_it() -> None:
    helpers = {name for f in HELPER_FILES for name, _ in _definitions(_read(f))}
    for script in SCRIPT_NAMES:
        source = _source(script)
        code = re.sub(r"--[^\n]*", "", source)
        defined = set(re.findall(r"^local (?:function )?([A-Za-z_]\w*)", source, re.M))
        used = {name for name in helpers if re.search(rf"\b{name}\b", code)}
        assert used <= defined, (script, sorted(used - defined))


def test_a_script_carries_no_helper_it_does_not_use() -> None:
    source = _source("lower_due")  # uses none
    assert not re.search(r"^local function", source, re.M)
    finish = _source("finish")
    assert "local function health_sample" in finish  # through feed_health
    assert "local function health_sample" not in _source("enqueue")
