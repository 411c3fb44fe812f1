"""``python -m gateway`` is the ``jobgate`` command."""

import sys

from gateway.cli import main

sys.exit(main())
