"""``ctxstore local status PATH`` and ``ctxstore local stop PATH``: the private server of a
``local://`` store directory (PATH, or the ``local://PATH`` URL itself).

``status`` prints the server's pid, socket, memory and clients (the clients of ctxstore's own
short connections and of the keeper not counted), or ``not running`` with exit code 3, as
service managers do; ``--json`` prints one object (``{"running": false}`` when none runs).
``stop`` shuts the server down after it writes out its append-only file; stopping a directory
whose server does not run is not an error. Neither starts a server nor creates the directory.
The local store's modules load only when the command runs (they need a POSIX system, and the
rest of the command line does not).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ctxstore.store.local import LocalServer

#: ``status``'s exit code when no server runs (the LSB's "program is not running").
NOT_RUNNING_EXIT = 3


def add_local_command(commands: Any) -> None:
    """The ``local`` subcommand on the CLI's subparsers."""
    local = commands.add_parser(
        "local", help="the private server of a local:// store: status, stop"
    )
    actions = local.add_subparsers(dest="local_command", metavar="ACTION", required=True)
    status = actions.add_parser("status", help="pid, socket, memory and clients of the server")
    status.add_argument("path", metavar="PATH", help="the store's directory (or local://PATH)")
    status.add_argument("--json", action="store_true", help="print the status as JSON")
    status.set_defaults(handler=_status)
    stop = actions.add_parser("stop", help="shut the server down (its data stays on disk)")
    stop.add_argument("path", metavar="PATH", help="the store's directory (or local://PATH)")
    stop.set_defaults(handler=_stop)


def _server(path: str) -> LocalServer:
    from ctxstore.store.connection import require_posix
    from ctxstore.store.local import LocalServer, parse_local_url, place_of

    require_posix()
    directory = parse_local_url(path)[0] if path.startswith("local://") else path
    return LocalServer(place_of(directory, create=False))


def _status(args: argparse.Namespace) -> int:
    server = _server(args.path)
    status = server.status()
    if args.json:
        shown = {"running": False} if status is None else {"running": True, **asdict(status)}
        print(json.dumps(shown, indent=2))
    elif status is None:
        print(f"not running: {server.place.directory}")
    else:
        idle = "never" if status.idle_timeout <= 0 else f"after {status.idle_timeout:g} s idle"
        print(f"running: {status.directory}")
        print(f"  pid      {status.pid} ({status.server}, up {status.uptime_seconds} s)")
        print(f"  socket   {status.socket}")
        print(f"  memory   {status.used_memory_human} ({status.used_memory} bytes)")
        print(f"  clients  {status.clients}")
        print(f"  stops    {idle}")
    return 0 if status is not None else NOT_RUNNING_EXIT


def _stop(args: argparse.Namespace) -> int:
    server = _server(args.path)
    pid = server.stop()
    if pid is None:
        print(f"not running: {server.place.directory}")
    else:
        print(f"stopped: {server.place.directory} (pid {pid})")
    return 0
