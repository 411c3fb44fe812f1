"""A local ``redis-server`` child process for development and tests.

``jobgate dev`` and the test suite both need a Redis they own: one started on
a loopback port, in a data directory of their choosing, and stopped again when
they are done. Neither may rely on a Redis that happens to be running already.
:class:`ManagedRedis` is that process::

    with ManagedRedis(Path(".jobgate/redis")) as redis_server:
        print(redis_server.url)  # redis://127.0.0.1:<port>/0

The server listens on 127.0.0.1 only, never evicts keys (Jobgate's state must
not silently disappear under memory pressure), writes no RDB snapshots, and
keeps an append-only file when ``appendonly`` is on, so a restart over the same
data directory finds the data again. Its output goes to ``redis.log`` in the
data directory.

This is tooling, not the request path: production deployments point Jobgate at
a Redis their operators run. The code is synchronous (``subprocess`` and the
sync redis client) so that a pytest session fixture and the CLI can both use it.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

__all__ = [
    "ManagedRedis",
    "RedisServerNotFound",
    "RedisServerStartError",
    "find_redis_server",
    "free_port",
]

_HOST = "127.0.0.1"
_APPENDFSYNC_CHOICES = ("always", "everysec", "no")
_POLL_INTERVAL = 0.02
_LOG_TAIL_LINES = 20
# When we picked the port ourselves, another process may grab it between
# free_port() and redis-server's bind(); try a fresh port this many times.
_PORT_ATTEMPTS = 3


class RedisServerNotFound(Exception):
    """There is no ``redis-server`` executable on ``PATH``."""

    def __init__(self) -> None:
        super().__init__(
            "redis-server was not found on PATH. Jobgate runs a local Redis for "
            "development and tests; install it (e.g. `apt-get install redis-server` "
            "or `brew install redis`) and try again."
        )


class RedisServerStartError(Exception):
    """``redis-server`` exited or did not become ready in time."""


def find_redis_server() -> str:
    """Return the path of the ``redis-server`` executable on ``PATH``."""
    path = shutil.which("redis-server")
    if path is None:
        raise RedisServerNotFound()
    return path


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that is free at the time of the call."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((_HOST, 0))
        port: int = sock.getsockname()[1]
        return port


class ManagedRedis:
    """A ``redis-server`` child process bound to 127.0.0.1.

    ``port=None`` picks a free port. ``extra_args`` are passed to
    ``redis-server`` after the defaults, so they can override them.
    """

    def __init__(
        self,
        data_dir: Path,
        port: int | None = None,
        appendonly: bool = True,
        appendfsync: str = "everysec",
        extra_args: Sequence[str] = (),
    ) -> None:
        if appendfsync not in _APPENDFSYNC_CHOICES:
            raise ValueError(
                f"appendfsync must be one of {', '.join(_APPENDFSYNC_CHOICES)}, not {appendfsync!r}"
            )
        self._data_dir = Path(data_dir).resolve()
        self._auto_port = port is None
        self._port = free_port() if port is None else port
        self._appendonly = appendonly
        self._appendfsync = appendfsync
        self._extra_args = tuple(extra_args)
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def data_dir(self) -> Path:
        return self._data_dir

    @property
    def log_path(self) -> Path:
        return self._data_dir / "redis.log"

    @property
    def port(self) -> int:
        return self._port

    @property
    def url(self) -> str:
        return f"redis://{_HOST}:{self._port}/0"

    @property
    def process(self) -> subprocess.Popen[bytes] | None:
        """The most recently started child process, or ``None`` before ``start()``."""
        return self._process

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self, timeout: float = 10.0) -> None:
        """Launch ``redis-server`` and return once it answers PING.

        Raises :class:`RedisServerNotFound` if there is no ``redis-server``, and
        :class:`RedisServerStartError` (with the end of its log) if it exits or is
        not ready within ``timeout`` seconds.
        """
        if self.running:
            raise RuntimeError(f"redis-server is already running on port {self._port}")
        executable = find_redis_server()
        self._data_dir.mkdir(parents=True, exist_ok=True)
        attempts = _PORT_ATTEMPTS if self._auto_port else 1
        for attempt in range(1, attempts + 1):
            log_offset = self._log_size()
            process = self._process = self._launch(executable)
            try:
                self._wait_ready(process, timeout)
                return
            except RedisServerStartError as e:
                self._abandon(process, timeout)
                log = self._read_log(log_offset)
                if attempt < attempts and "Address already in use" in log:
                    self._port = free_port()
                    continue
                raise RedisServerStartError(
                    f"{e} (port {self._port}, exit code {process.returncode}); "
                    f"last lines of {self.log_path}:\n{_tail(log)}"
                ) from None
            except BaseException:
                self._abandon(process, timeout)  # e.g. Ctrl-C while waiting
                raise

    def stop(self, timeout: float = 10.0) -> None:
        """Shut the server down and wait for it to exit. Safe to call repeatedly.

        Sends SHUTDOWN (which flushes the append-only file), then falls back to
        SIGTERM and finally SIGKILL if the process has not exited in ``timeout``.
        """
        process = self._process
        if process is None or process.poll() is not None:
            return
        try:
            with self._client(timeout) as client:
                client.shutdown()
        except redis.RedisError:
            # SHUTDOWN was refused or timed out; SIGTERM runs the same shutdown.
            process.terminate()
        self._reap(process, timeout)

    def __enter__(self) -> ManagedRedis:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _command(self, executable: str) -> list[str]:
        return [
            executable,
            "--bind", _HOST,
            "--port", str(self._port),
            "--dir", str(self._data_dir),
            "--appendonly", "yes" if self._appendonly else "no",
            "--appendfsync", self._appendfsync,
            "--save", "",
            "--maxmemory-policy", "noeviction",
            "--protected-mode", "yes",
            "--daemonize", "no",
            *self._extra_args,
        ]  # fmt: skip

    def _launch(self, executable: str) -> subprocess.Popen[bytes]:
        # The child keeps its own copy of the log file descriptor.
        with self.log_path.open("ab") as log:
            return subprocess.Popen(
                self._command(executable),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def _client(self, timeout: float) -> redis.Redis:
        # No retries: callers poll or give up themselves.
        return redis.Redis(
            host=_HOST,
            port=self._port,
            socket_connect_timeout=timeout,
            socket_timeout=timeout,
            retry=Retry(NoBackoff(), 0),
        )

    def _wait_ready(self, process: subprocess.Popen[bytes], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        with self._client(timeout=1.0) as client:
            while True:
                if process.poll() is not None:
                    raise RedisServerStartError("redis-server exited during startup")
                # While the append-only file loads, PING answers LOADING (an error).
                try:
                    # Another server may hold an explicitly given port; make sure
                    # the one answering is ours.
                    if client.ping() and client.info("server")["process_id"] == process.pid:
                        return
                except redis.RedisError:
                    pass
                if time.monotonic() >= deadline:
                    raise RedisServerStartError("redis-server did not answer PING in time")
                time.sleep(_POLL_INTERVAL)

    @classmethod
    def _abandon(cls, process: subprocess.Popen[bytes], timeout: float) -> None:
        if process.poll() is None:
            process.terminate()
        cls._reap(process, timeout)

    @staticmethod
    def _reap(process: subprocess.Popen[bytes], timeout: float) -> None:
        try:
            process.wait(timeout)
            return
        except subprocess.TimeoutExpired:
            process.terminate()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def _log_size(self) -> int:
        try:
            return self.log_path.stat().st_size
        except FileNotFoundError:
            return 0

    def _read_log(self, offset: int) -> str:
        try:
            with self.log_path.open("rb") as log:
                log.seek(offset)
                return log.read().decode(errors="replace")
        except FileNotFoundError:
            return ""


def _tail(text: str) -> str:
    return "\n".join(text.rstrip().splitlines()[-_LOG_TAIL_LINES:])
