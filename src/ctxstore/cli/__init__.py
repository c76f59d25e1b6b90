"""The ``ctxstore`` command line: chats, trees, logs, export and import, verify, the worker."""

from ctxstore.cli.main import main

__all__ = ["main"]
