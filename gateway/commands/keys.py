"""``jobgate keys``: what concerns API keys.

::

    jobgate keys end-sessions NAME      end every admin UI session of the key named NAME
"""

from __future__ import annotations

import argparse

from gateway.commands.common import connect, print_json


def add_commands(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], flags: argparse.ArgumentParser
) -> None:
    keys = commands.add_parser(
        "keys",
        help="end the admin UI sessions of an API key",
        description="API keys are configured in JOBGATE_API_KEYS; these commands act on what "
        "the gateways hold for them.",
    )
    keys_commands = keys.add_subparsers(title="commands", metavar="COMMAND", required=True)
    end = keys_commands.add_parser(
        "end-sessions",
        parents=[flags],
        help="end every admin UI session of a key",
        description="End every admin UI session opened with the API key named NAME (its "
        "'name' in JOBGATE_API_KEYS, key-<n> for an unnamed one), on every gateway at its "
        "next request. The key itself stays valid: remove it from JOBGATE_API_KEYS to stop "
        "it. Needs the admin scope.",
    )
    end.add_argument("name", metavar="NAME", help="the API key's name")
    end.set_defaults(run=_end_sessions)


def _end_sessions(args: argparse.Namespace) -> int:
    with connect(args) as client:
        result = client.end_sessions(args.name)
    if args.json:
        print_json(result)
        return 0
    plural = "" if result.ended == 1 else "s"
    print(f"ended {result.ended} admin UI session{plural} of key {result.key_name}")
    return 0
