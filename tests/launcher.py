"""Gateway and worker processes for the end-to-end tests, forked from a process that has
already imported them.

A gateway or SDK worker started as ``python -m ...`` spends about a second of CPU importing
before it serves, and the suite starts a few hundred of them: on two cores that was a third of
``make test``. :func:`start` runs the same command line in a child of a multiprocessing
forkserver that imported :data:`PRELOAD` once per pytest worker, so each start costs a fork
and the process's own setup.

The child is a real process of its own, as with ``subprocess.Popen``: a test can SIGKILL,
SIGSTOP or SIGTERM it by pid, and :class:`Launched` answers ``poll``/``wait``/``returncode``
like a ``Popen`` (a negative return code is the signal that ended it). What differs: the
child's environment and working directory are set after the fork, from the arguments, so
everything read from them at start-up (settings, ``E2E_LOG``) is the test's; modules already
imported stay imported, so a test that needs a module re-read at import time must use
``subprocess.Popen``.

``JOBGATE_TEST_FORK=0`` starts every process with ``subprocess.Popen`` instead, as before.
"""

from __future__ import annotations

import atexit
import contextlib
import multiprocessing
import multiprocessing.context
import os
import runpy
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

# What the forkserver imports once: the gateway's command line and app, the servers it runs
# on, and the SDK worker the test worker apps are built on.
PRELOAD = [
    "gateway.cli",
    "gateway.app",
    "gateway.serving.server",
    "uvicorn.main",
    "sdk",
]
_context: multiprocessing.context.ForkServerContext | None = None


def forking() -> bool:
    return os.environ.get("JOBGATE_TEST_FORK", "1") != "0" and sys.platform == "linux"


def _forkserver() -> multiprocessing.context.ForkServerContext:
    global _context
    if _context is None:
        _context = multiprocessing.get_context("forkserver")
        _context.set_forkserver_preload(PRELOAD)
    return _context


class Launched:
    """A forked process, read like a :class:`subprocess.Popen`."""

    def __init__(self, process: multiprocessing.process.BaseProcess) -> None:
        self._process = process
        pid = process.pid
        assert pid is not None
        self.pid: int = pid

    @property
    def returncode(self) -> int | None:
        return self._process.exitcode

    def poll(self) -> int | None:
        return self._process.exitcode

    def wait(self, timeout: float | None = None) -> int:
        self._process.join(timeout)
        code = self._process.exitcode
        if code is None:
            raise subprocess.TimeoutExpired(str(self.pid), timeout or 0)
        return code

    def send_signal(self, signal: int) -> None:
        if self._process.exitcode is None:
            os.kill(self.pid, signal)

    def terminate(self) -> None:
        self._process.terminate()

    def kill(self) -> None:
        self._process.kill()


Process = subprocess.Popen[bytes] | Launched


def start(
    module: str,
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: Path,
    stderr: Path | None = None,
) -> Process:
    """Run ``python -m module *argv`` with ``env`` as its whole environment, in ``cwd``;
    ``stderr``: a file its standard error is appended to, else the caller's."""
    if not forking():
        with open(stderr, "ab") if stderr else contextlib.nullcontext() as err:
            return subprocess.Popen(
                [sys.executable, "-m", module, *argv], env=dict(env), cwd=cwd, stderr=err
            )
    process = _forkserver().Process(
        target=_run_module,
        args=(module, list(argv), dict(env), str(cwd), str(stderr) if stderr else None),
        daemon=False,
    )
    process.start()
    return Launched(process)


def run(
    module: str, argv: Sequence[str], *, env: Mapping[str, str], cwd: Path, timeout: float
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m module *argv`` to its end, as ``subprocess.run`` with
    ``capture_output=True, text=True`` and a stdin that is not a terminal would."""
    if not forking():
        return subprocess.run(
            [sys.executable, "-m", module, *argv],
            env=dict(env),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    with tempfile.TemporaryDirectory() as tmp:
        out, err = Path(tmp, "stdout"), Path(tmp, "stderr")
        process = _forkserver().Process(
            target=_run_module,
            args=(module, list(argv), dict(env), str(cwd), str(err), str(out)),
            daemon=False,
        )
        process.start()
        launched = Launched(process)
        try:
            code = launched.wait(timeout)
        except subprocess.TimeoutExpired:
            launched.kill()  # as subprocess.run does: no command outlives its timeout
            launched.wait()
            raise
        return subprocess.CompletedProcess([module, *argv], code, out.read_text(), err.read_text())


def _redirect(path: str, fd: int) -> None:
    opened = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.dup2(opened, fd)
    os.close(opened)


def _run_module(
    module: str,
    argv: list[str],
    env: dict[str, str],
    cwd: str,
    stderr: str | None,
    stdout: str | None = None,
) -> None:
    """In the forked child: become ``python -m module *argv``."""
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    if stderr:
        _redirect(stderr, 2)
    if stdout:
        _redirect(stdout, 1)
    sys.argv = [module, *argv]
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        # What a normal interpreter exit runs (log flushes, exporters' shutdown): the
        # forkserver's child ends with os._exit, which skips them.
        atexit._run_exitfuncs()
