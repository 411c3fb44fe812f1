"""Jobgate SDK."""
