"""Pushing tasks to worker endpoints: claim, sign, send, read the answer, record it."""
