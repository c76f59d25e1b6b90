"""``python -m ctxstore``: the ``ctxstore`` command line (see :mod:`ctxstore.cli`)."""

from __future__ import annotations

import sys

from ctxstore.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
