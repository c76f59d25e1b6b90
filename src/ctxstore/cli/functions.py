"""``ctxstore functions load``: this release's Redis Functions library, loaded by an operator.

A store loads the library itself where its user may (``FUNCTION LOAD``); a tenant of
``deploy/acl.conf`` may only call it (``FCALL`` / ``FCALL_RO``), so an operator runs this
once per release, before or during the deploy, with a user that may load functions
(:meth:`~ctxstore.store.Store.load_functions`). It prints the library, the primaries it was
loaded on or already present on, and every ctxstore library each primary holds (``--json``:
the report as JSON). Loading is safe to repeat and to run beside live traffic: a library is
named after its code, so a loaded one is never replaced.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from ctxstore.cli import views
from ctxstore.models import FunctionsReport
from ctxstore.store.sync_store import AdminStore

Opener = Callable[[argparse.Namespace], AdminStore]


def add_functions_command(commands: Any, open_store: Opener) -> None:
    """The ``functions`` subcommand (``functions load``) on the CLI's subparsers."""
    functions = commands.add_parser(
        "functions", help="the Redis Functions library of this release (load it as an operator)"
    )
    actions = functions.add_subparsers(dest="action", metavar="ACTION", required=True)
    load = actions.add_parser(
        "load", help="load this release's library on every primary (for tenants without it)"
    )
    load.add_argument("--json", action="store_true", help="print the report as JSON")
    load.set_defaults(handler=lambda args: _load(args, open_store))


def _load(args: argparse.Namespace, open_store: Opener) -> int:
    with open_store(args) as store:
        report = store.load_functions()
    print(views.as_json(report.as_dict()) if args.json else report_text(report))
    return 0


def report_text(report: FunctionsReport) -> str:
    """The report as lines: the library, then each primary with what it holds."""
    lines = [f"library {report.library}"]
    for node, libraries in report.libraries.items():
        done = "loaded" if node in report.loaded else "already loaded"
        others = [name for name in libraries if name != report.library]
        beside = f" (beside {', '.join(others)})" if others else ""
        lines.append(f"  {node}: {done}{beside}")
    return "\n".join(lines)
