"""Point the SDK at the gateway ``make dev`` runs, unless ``JOBGATE_URL`` is set already.

``jobgate dev`` listens on http://127.0.0.1:8787 and keeps its admin API key in
``.jobgate/dev-api-key`` at the repository root; this fills in ``JOBGATE_URL`` and
``JOBGATE_API_KEY`` from there, so the examples run with no exports. Against any other
gateway, set both variables yourself.
"""

from __future__ import annotations

import os
from pathlib import Path

DEV_URL = "http://127.0.0.1:8787"
DEV_KEY_FILE = Path(__file__).resolve().parents[2] / ".jobgate" / "dev-api-key"


def use_dev_gateway() -> None:
    if "JOBGATE_URL" in os.environ:
        return
    os.environ["JOBGATE_URL"] = DEV_URL
    if "JOBGATE_API_KEY" not in os.environ and DEV_KEY_FILE.exists():
        os.environ["JOBGATE_API_KEY"] = DEV_KEY_FILE.read_text(encoding="utf-8").strip()
