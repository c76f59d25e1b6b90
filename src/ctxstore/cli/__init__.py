"""The ``ctxstore`` command line: chats, trees, logs, export and import, verify, the worker."""

from __future__ import annotations

from ctxstore._base.exports import lazy_exports
from ctxstore.cli.main import main

__all__ = ["main"]

#: Names of the 0.3 module ``ctxstore.cli`` (now ``ctxstore.cli.main``).
__getattr__, __dir__ = lazy_exports(
    __name__,
    {},
    dict.fromkeys(
        ("DEFAULT_CHAT_LIMIT", "Handler", "MEMORY_NOTE", "build_parser"), "ctxstore.cli.main"
    ),
)
