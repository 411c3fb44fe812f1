"""Point the SDK at the gateway ``make dev`` runs, unless ``JOBGATE_URL`` is set already.

``jobgate dev`` listens on http://127.0.0.1:8787 and keeps its admin API key in
``.jobgate/dev-api-key`` at the repository root; this fills in ``JOBGATE_URL`` and
``JOBGATE_API_KEY`` from there, so the examples run with no exports. Against any other
gateway, set both variables yourself.

``one_line_errors`` ends a script that cannot talk to the gateway (not running, wrong key) with
one line on stderr and exit code 1, as the ``jobgate`` command line does, not a traceback.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from sdk import ApiError, JobgateError

DEV_URL = "http://127.0.0.1:8787"
DEV_KEY_FILE = Path(__file__).resolve().parents[2] / ".jobgate" / "dev-api-key"


def use_dev_gateway() -> None:
    if "JOBGATE_URL" in os.environ:
        return
    os.environ["JOBGATE_URL"] = DEV_URL
    if "JOBGATE_API_KEY" not in os.environ and DEV_KEY_FILE.exists():
        os.environ["JOBGATE_API_KEY"] = DEV_KEY_FILE.read_text(encoding="utf-8").strip()


@contextmanager
def one_line_errors() -> Iterator[None]:
    program = Path(sys.argv[0]).name
    url = os.environ.get("JOBGATE_URL", DEV_URL)
    try:
        yield
    except httpx.TransportError as e:
        reason = re.sub(r"^\[Errno -?\d+\]\s*", "", str(e)) or type(e).__name__
        hint = " (is `make dev` running?)" if url == DEV_URL else ""
        sys.exit(f"{program}: error: cannot reach the gateway at {url}: {reason}{hint}")
    except ApiError as e:
        sys.exit(f"{program}: error: the gateway at {url} answered {e}".splitlines()[0])
    except JobgateError as e:
        sys.exit(f"{program}: error: {e}")
