"""Tests of the SDK (package ``tests.sdk``; the SDK itself is the top-level ``sdk``)."""
