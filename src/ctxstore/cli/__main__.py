"""``python -m ctxstore.cli``: the ``ctxstore`` command line (as ``python -m ctxstore``)."""

from __future__ import annotations

import sys

from ctxstore.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
