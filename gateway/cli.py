"""The ``jobgate`` command line.

::

    jobgate serve [--host H] [--port P] [--redis-url URL]   the gateway, against your Redis
    jobgate dev [--data-dir DIR] [--redis-port N]           gateway + local Redis, one command
    jobgate openapi [--output FILE]                         the OpenAPI document, as YAML

    jobgate queues                                          queues and their task counts
    jobgate tasks QUEUE [--state S] | --running             a queue's tasks; running ones
    jobgate dlq list | resubmit                             dead letters, and retrying them
    jobgate clean QUEUE [--state S] [--older-than D]        delete finished tasks now
    jobgate jobs list | show | run | pause | resume | delete | runs | logs   jobs and runs
    jobgate keys end-sessions NAME                          end an API key's admin UI sessions
    jobgate worker --pull --queue Q --endpoint EP M:W       a pull worker (gateway.commands.worker)

Settings come from ``JOBGATE_*`` variables (see ``docs/configuration.md``); flags override them.
The operator commands (``queues`` and below, in :mod:`gateway.commands`) are clients of a
running gateway: ``--url``/``--api-key`` or ``JOBGATE_URL``/``JOBGATE_API_KEY`` (docs/cli.md).
Errors a user can cause (no ``redis-server``, a port in use, Redis unreachable, a bad setting)
end with one ``jobgate: error: ...`` line on stderr and exit code 1.

Each command imports what it needs when it runs, so ``--help`` and ``openapi`` do not load the
server stack.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import secrets
import shlex
import shutil
import signal
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError
from pydantic_settings import SettingsError

from gateway.commands import jobs, keys, queues, repair, worker
from gateway.commands.common import CommandError, UsageError, gateway_flags
from gateway.serving.redis_server import ManagedRedis, RedisServerNotFound, RedisServerStartError
from gateway.settings import ADMIN_SCOPE, ApiKey, Settings
from sdk.wire.base import reason

if TYPE_CHECKING:
    from gateway.serving.server import Listening

__all__ = ["CommandError", "main"]

EXIT_ERROR = 1
EXIT_USAGE = 2  # argparse's own, for arguments that do not go together
EXIT_INTERRUPTED = 130
DEFAULT_DATA_DIR = Path(".jobgate")
DEV_KEY_FILE = "dev-api-key"
LOG_LEVELS = ("debug", "info", "warning", "error")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process's exit code."""
    args = build_parser().parse_args(argv)
    try:
        code: int = args.run(args)
    except UsageError as e:
        args.parser.print_usage(sys.stderr)
        print(f"{args.parser.prog}: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except CommandError as e:
        print(f"jobgate: error: {e}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("jobgate: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # the reader left early, as in `jobgate dlq list | head`
        _drop_stdout()
        return EXIT_ERROR
    return code


def _drop_stdout() -> None:
    """Point stdout at /dev/null, so the final flush at exit cannot fail on the broken pipe."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, io.UnsupportedOperation):
        pass  # not a real file descriptor (tests): nothing will be flushed to the pipe


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="jobgate",
        description="Jobgate: an HTTP dispatch gateway for background tasks.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    commands = parser.add_subparsers(title="commands", metavar="COMMAND", required=True)

    serve = commands.add_parser(
        "serve",
        help="run the gateway against an existing Redis",
        description="Run the gateway. Settings come from JOBGATE_* variables; flags override.",
    )
    _server_flags(serve)
    serve.add_argument("--redis-url", help="Redis holding all state (JOBGATE_REDIS_URL)")
    serve.set_defaults(run=_serve)

    dev = commands.add_parser(
        "dev",
        help="run the gateway with a managed local Redis, for development",
        description="Start a local redis-server (append-only file on) and the gateway, print "
        "the URL and an admin API key, and stop both on Ctrl-C.",
    )
    _server_flags(dev)
    dev.add_argument(
        "--data-dir",
        type=Path,
        default=DEFAULT_DATA_DIR,
        help="folder for Redis's data (DIR/redis) and the dev API key (default: %(default)s)",
    )
    dev.add_argument("--redis-port", type=int, help="port of the local Redis (default: a free one)")
    dev.add_argument(
        "--tls",
        action="store_true",
        help="serve HTTPS and HTTP/3 with a self-signed certificate for localhost, kept in "
        "DIR/tls (trust it with curl --cacert DIR/tls/localhost.crt)",
    )
    dev.set_defaults(run=_dev)

    openapi = commands.add_parser(
        "openapi",
        help="print the OpenAPI document as YAML",
        description="Print the gateway's OpenAPI document as YAML, or write it to a file.",
    )
    openapi.add_argument("-o", "--output", type=Path, help="write to this file, not stdout")
    openapi.set_defaults(run=_openapi)

    flags = gateway_flags()
    queues.add_commands(commands, flags)
    repair.add_commands(commands, flags)
    jobs.add_commands(commands, flags)
    keys.add_commands(commands, flags)
    worker.add_commands(commands)
    _remember_parsers(parser)
    return parser


def _server_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", help="address to listen on (JOBGATE_HOST)")
    parser.add_argument("--port", type=int, help="TCP port to listen on (JOBGATE_PORT)")
    parser.add_argument("--log-level", choices=LOG_LEVELS, help="log level (JOBGATE_LOG_LEVEL)")


# --- serve -------------------------------------------------------------------------------------


def _serve(args: argparse.Namespace) -> int:
    from gateway.serving.server import ServerError, serve

    settings = _settings(args, redis_url=args.redis_url)
    try:
        serve(settings)
    except ServerError as e:
        raise CommandError(str(e)) from None
    return 0


# --- dev ---------------------------------------------------------------------------------------


def _dev(args: argparse.Namespace) -> int:
    from gateway.serving import gc_tuning
    from gateway.serving.server import ServerError, configure_logging, run, serve_async

    data_dir: Path = args.data_dir
    # A dev gateway pushes to workers on this machine, and logs each request unless told not to.
    settings = _settings(args, allow_private_endpoints=True)
    if "access_log" not in settings.model_fields_set:
        settings.access_log = True
    cert = None
    if args.tls and settings.certfile is None:
        from gateway.serving.tls import self_signed

        cert, settings.keyfile = self_signed(data_dir / "tls")
        settings.certfile = cert
    redis_server = ManagedRedis(data_dir / "redis", port=args.redis_port, appendonly=True)
    try:
        configure_logging(settings.log_level)
        with _sigint_blocked():
            redis_server.start()
        api_key = _shown_key(settings)
        if api_key is None:  # no JOBGATE_API_KEYS: make (or reuse) one
            key = _dev_api_key(data_dir / DEV_KEY_FILE)
            api_key = ApiKey(key=key, scopes=[ADMIN_SCOPE], name="dev")
            settings.api_keys = [api_key]
        settings.redis_url = redis_server.url
        gc_tuning.tune(settings.gc_threshold)

        def ready(listening: Listening) -> None:
            gc_tuning.freeze_startup()
            print(_banner(listening, api_key, redis_server, cert), flush=True)

        run(serve_async(settings, on_ready=ready))
        print("jobgate: gateway stopped; stopping Redis", file=sys.stderr)
    except RedisServerNotFound as e:
        raise CommandError(str(e)) from None
    except RedisServerStartError as e:
        raise CommandError(_redis_start_failure(e, redis_server)) from None
    except ServerError as e:
        raise CommandError(str(e)) from None
    finally:
        redis_server.stop()
    return 0


@contextmanager
def _sigint_blocked() -> Iterator[None]:
    """Block SIGINT in this thread while ``redis-server`` is spawned.

    ``redis-server`` runs in our process group, so Ctrl-C in the terminal would reach it too and
    stop Redis while the gateway still drains. A child inherits its parent's blocked-signal mask
    and ``redis-server`` does not unblock SIGINT, so it then stops only when told to: after the
    gateway. A Ctrl-C pressed meanwhile reaches us as soon as the mask is restored.
    """
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _shown_key(settings: Settings) -> ApiKey | None:
    """The key to show for keys given in ``JOBGATE_API_KEYS``: an admin one if any."""
    keys = sorted(settings.api_keys, key=lambda k: ADMIN_SCOPE not in k.scopes)
    return keys[0] if keys else None


def _dev_api_key(path: Path) -> str:
    """The dev gateway's admin key: kept in ``path`` so restarts keep it, made on first use."""
    try:
        key = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        key = ""
    if len(key) >= 16:
        return key
    key = secrets.token_urlsafe(24)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        file.write(key + "\n")
    return key


def _banner(
    listening: Listening, api_key: ApiKey, redis_server: ManagedRedis, cert: Path | None = None
) -> str:
    exports = f"export JOBGATE_URL={shlex.quote(listening.url)} "
    exports += f"JOBGATE_API_KEY={shlex.quote(api_key.key)}"
    scopes = ", ".join(api_key.scopes)
    if ADMIN_SCOPE not in api_key.scopes:  # the examples register queues: that needs admin
        scopes += "; not admin: it cannot register queues or endpoints"
    http3 = f"  HTTP/3:    UDP port {listening.quic_port}\n" if listening.quic_port else ""
    if listening.quic_port and cert is not None:
        http3 += f"  TLS:       self-signed for localhost: curl --cacert {shlex.quote(str(cert))}\n"
    return (
        "\n"
        "Jobgate dev gateway is up.\n"
        "\n"
        f"  Gateway:   {listening.url}\n"
        f"  Admin UI:  {listening.url}/admin  (sign in with the API key)\n"
        f"  API key:   {api_key.key}  ({scopes})\n"
        f"{http3}"
        f"  Redis:     {redis_server.url}  (data in {redis_server.data_dir})\n"
        f"  Commands:  {_command()} --help\n"
        "\n"
        "To use the SDK from another terminal:\n"
        "\n"
        f"  {exports}\n"
        "\n"
        "Press Ctrl-C to stop.\n"
    )


def _command() -> str:
    """How to run ``jobgate`` from the shell that started this one: its name when PATH finds
    this installation's, else its path (``.venv/bin/jobgate`` after ``make dev``)."""
    script = Path(sys.executable).with_name("jobgate")
    found = shutil.which("jobgate")
    if found and Path(found).resolve() == script.resolve():
        return "jobgate"
    with contextlib.suppress(ValueError):
        return str(script.relative_to(Path.cwd()))
    return str(script)


def _redis_start_failure(error: RedisServerStartError, redis_server: ManagedRedis) -> str:
    detail = str(error)
    log = redis_server.log_path
    if "Address already in use" in detail:
        return f"port {redis_server.port} is in use; choose another --redis-port (see {log})"
    reason = detail.splitlines()[0].split("; last lines of")[0]
    return f"redis-server did not start: {reason}; see {log}"


# --- openapi -----------------------------------------------------------------------------------


def _openapi(args: argparse.Namespace) -> int:
    from gateway.api.openapi import openapi_yaml

    text = openapi_yaml()
    if args.output is None:
        sys.stdout.write(text)
        return 0
    try:
        args.output.write_text(text, encoding="utf-8")
    except OSError as e:
        raise CommandError(f"cannot write {args.output}: {e.strerror or e}") from None
    return 0


# --- shared ------------------------------------------------------------------------------------


def _settings(args: argparse.Namespace, **overrides: Any) -> Settings:
    """Settings from the environment, overridden by the flags that were given."""
    flags = {"host": args.host, "port": args.port, "log_level": args.log_level, **overrides}
    given = {name: value for name, value in flags.items() if value is not None}
    try:
        return Settings(**given)
    except ValidationError as e:
        problems = "; ".join(
            f"{'.'.join(map(str, err['loc'])) or 'settings'}: " + reason(err) for err in e.errors()
        )
        raise CommandError(f"invalid settings: {problems}") from None
    except SettingsError as e:  # a JOBGATE_* value that is not valid JSON
        raise CommandError(f"invalid settings: {e}: {e.__cause__}") from None


def _version() -> str:
    try:
        return version("jobgate")
    except PackageNotFoundError:
        return "unknown"


def _remember_parsers(parser: argparse.ArgumentParser) -> None:
    """Give each command's arguments its own parser (``args.parser``), so that a
    :class:`UsageError` is printed after that command's usage line, as argparse's are."""
    parser.set_defaults(parser=parser)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                _remember_parsers(sub)
