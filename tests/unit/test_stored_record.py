"""A stored task record leaves out the fields at their default (``task_json`` in
``lua/prelude.lua``); ``load_record`` puts them back, and reads a record stored whole (by an
earlier version, or with no field at its default) unchanged."""

from __future__ import annotations

import json

from gateway.store.records import load_record


def test_a_record_without_its_defaults_reads_as_the_whole_record() -> None:
    compact = {"name": "t", "run_at": 5, "sn": 1}
    assert load_record(json.dumps(compact)) == {
        **compact,
        "att": 0,
        "hist": 0,
        "prio": 0,
        "state": "queued",
        "created": 5,
    }


def test_a_record_stored_whole_reads_unchanged() -> None:
    whole = {
        "name": "t",
        "prio": 3,
        "created": 1,
        "run_at": 5,
        "att": 2,
        "hist": 2,
        "state": "succeeded",
    }
    assert load_record(json.dumps(whole)) == whole


def test_a_first_attempts_start_reads_from_first() -> None:
    compact = {"name": "t", "run_at": 5, "att": 1, "state": "running", "first": 7}
    assert load_record(json.dumps(compact))["started"] == 7
    retried = {**compact, "att": 2, "started": 9}
    assert load_record(json.dumps(retried))["started"] == 9
    resubmitted = {"name": "t", "run_at": 5, "started": 9}  # (resubmit.lua drops first)
    assert "first" not in load_record(json.dumps(resubmitted))
