"""redis-py connections to a ``local://`` server that start it when it does not answer.

A connection first just connects. Only when the socket is missing or refuses (no server yet,
a crashed one, one stopped while idle) does it call
:meth:`~ctxstore.store.local.server.LocalServer.ensure`, which starts the server, or waits for
the process already starting it, and then connects again. So a client of a running server pays
nothing, and a store that outlived its server (a long-lived process, a crash) carries on: the
command that found the server gone is retried by redis-py's connection retry on a new
connection, as after any broken connection, and the writes recognize their own replay.
"""

from __future__ import annotations

import socket
from typing import Any

from redis.connection import UnixDomainSocketConnection

from ctxstore.store.local.server import LocalServer

#: What connecting to a unix socket raises when no server listens on it.
NO_SERVER = (FileNotFoundError, ConnectionRefusedError)


class LocalConnection(UnixDomainSocketConnection):
    """A sync connection that starts the directory's server when none answers."""

    def __init__(self, *, local_server: LocalServer, **kwargs: Any) -> None:
        super().__init__(**kwargs)  # type: ignore[no-untyped-call]
        self.local_server = local_server

    def _connect(self) -> socket.socket:
        try:
            return super()._connect()  # type: ignore[no-untyped-call,no-any-return]
        except NO_SERVER:
            self.local_server.ensure()
            return super()._connect()  # type: ignore[no-untyped-call,no-any-return]
