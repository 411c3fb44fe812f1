"""Pushing tasks to worker endpoints: claim, sign, send, read the answer, record it; and the
durable HTTP calls the gateway makes for tasks (``calls.py``, ``http_call.py``).

Imports caches, telemetry, security, store and core; imported by background, services and the
app factory.
"""
