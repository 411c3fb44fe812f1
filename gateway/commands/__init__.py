"""The operator commands of ``jobgate``: look at queues and tasks, repair dead letters, clean.

They talk to a running gateway through the SDK's :class:`~sdk.client.Client`, like any other
API user; ``gateway.cli`` registers them next to ``serve``, ``dev`` and ``openapi``.

- :mod:`~gateway.commands.common`: the shared flags (``--url``, ``--api-key``, ``--json``),
  argument types and the error translation;
- :mod:`~gateway.commands.table`: aligned plain-text tables;
- :mod:`~gateway.commands.queues`: ``queues`` and ``tasks``;
- :mod:`~gateway.commands.repair`: ``dlq list``, ``dlq resubmit`` and ``clean``.
- :mod:`~gateway.commands.jobs`: ``jobs list|show|run|pause|resume|delete|runs|logs``.
- :mod:`~gateway.commands.keys`: ``keys end-sessions``.

Imports the SDK alone, nothing of the gateway; only ``gateway.cli`` imports it.
"""
