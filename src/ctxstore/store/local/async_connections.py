"""The asyncio twin of :class:`ctxstore.store.local.connections.LocalConnection` (a module of
its own so that sync users never import ``redis.asyncio``)."""

from __future__ import annotations

import asyncio
from typing import Any

from redis.asyncio.connection import UnixDomainSocketConnection

from ctxstore.store.local.connections import NO_SERVER
from ctxstore.store.local.server import LocalServer


class AsyncLocalConnection(UnixDomainSocketConnection):
    """An asyncio connection that starts the directory's server when none answers; the start
    (a child process and a wait) runs in a worker thread, off the event loop."""

    def __init__(self, *, local_server: LocalServer, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.local_server = local_server

    async def _connect(self) -> None:
        try:
            await super()._connect()  # type: ignore[no-untyped-call]
        except NO_SERVER:
            await asyncio.to_thread(self.local_server.ensure)
            await super()._connect()  # type: ignore[no-untyped-call]
