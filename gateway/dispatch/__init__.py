"""Pushing tasks to worker endpoints: claim, sign, send, read the answer, record it.

Imports caches, telemetry, security, store and core; imported by services and the app factory.
"""
