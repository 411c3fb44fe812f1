"""The key a task's payload gives it under a per-key rate limit."""

from __future__ import annotations

import hashlib

from pydantic import JsonValue

from gateway.core.rate_keys import rate_key_of


def test_scalars_at_the_path_are_keys() -> None:
    payload: JsonValue = {"kwargs": {"customer_id": "acme", "n": 7, "ok": True, "x": 1.5}}
    assert rate_key_of(payload, "kwargs.customer_id") == "acme"
    assert rate_key_of(payload, "kwargs.n") == "7"
    assert rate_key_of(payload, "kwargs.ok") == "true"
    assert rate_key_of(payload, "kwargs.x") is None  # floats are no key
    assert rate_key_of(payload, "kwargs") is None  # nor objects
    assert rate_key_of(payload, "kwargs.missing") is None
    assert rate_key_of(payload, "kwargs.customer_id.deeper") is None


def test_digits_index_lists_and_long_values_are_hashed() -> None:
    payload: JsonValue = {"args": ["first", {"id": "x" * 200}]}
    assert rate_key_of(payload, "args.0") == "first"
    assert rate_key_of(payload, "args.1.id") == hashlib.sha1(b"x" * 200).hexdigest()
    assert rate_key_of(payload, "args.2") is None
    assert rate_key_of({"7": "by-name"}, "7") == "by-name"  # digits name a field of an object
    assert rate_key_of(None, "a") is None
