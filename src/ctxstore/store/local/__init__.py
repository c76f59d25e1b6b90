"""``local://PATH``: a persistent store on the real engine, with no server to run yourself.

The first use of a directory starts a private Valkey (or Redis) server for it, on a unix socket
inside it, with an append-only file; later uses, from this process or another on the machine,
join that server. See :mod:`ctxstore.store.local.place` for the files, :mod:`.server` for the
lifetime, :mod:`.keeper` for the process that watches it.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl

from ctxstore.errors import ConfigurationError
from ctxstore.store.local.place import Place, place_of
from ctxstore.store.local.server import DEFAULT_IDLE_TIMEOUT, LocalServer, LocalStatus

__all__ = [
    "DEFAULT_IDLE_TIMEOUT",
    "LocalServer",
    "LocalStatus",
    "Place",
    "local_client",
    "parse_local_url",
    "place_of",
]

SCHEME = "local://"


def parse_local_url(url: str) -> tuple[str, float]:
    """(the directory as written, the idle timeout) of ``local://PATH[?idle=SECONDS]``.

    The path is everything after ``local://`` (``local://./ctxdata`` and ``local://ctxdata``
    are relative to the working directory, ``local:///srv/ctx`` is absolute, ``~`` is the home
    directory), so it is not parsed as a URL's host.
    """
    rest = url[len(SCHEME) :]
    path, _, query = rest.partition("?")
    idle = DEFAULT_IDLE_TIMEOUT
    try:
        options = parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError:
        raise ConfigurationError(f"malformed options {query!r} in {url!r}") from None
    for name, value in options:
        if name != "idle":
            raise ConfigurationError(
                f"unknown option {name!r} in {url!r}; local:// takes ?idle=SECONDS"
            )
        try:
            idle = float(value)
        except ValueError:
            idle = -1.0
        if not 0 <= idle < float("inf"):
            raise ConfigurationError(
                f"idle must be a number of seconds >= 0 (0: never stop), got {value!r} in {url!r}"
            )
    if not path:
        raise ConfigurationError(f"local:// needs a directory: local://PATH, got {url!r}")
    return path, idle


def local_client(
    path: str, idle_timeout: float, options: dict[str, Any], *, asynchronous: bool
) -> Any:
    """A redis-py client of the server of directory ``path`` (checked, and made when missing),
    whose connections start that server when it does not answer.

    The server binary is looked up now when no server runs, so a machine without one fails at
    ``connect`` with what to install, not at the first call.
    """
    server = LocalServer(place_of(path, create=True), idle_timeout=idle_timeout)
    if not server.running():
        from ctxstore.store.local.binary import server_binary

        server_binary()
    socket_path = server.place.socket_path()
    if asynchronous:
        import redis.asyncio

        from ctxstore.store.local.async_connections import AsyncLocalConnection

        client: Any = redis.asyncio.Redis(unix_socket_path=socket_path, **options)
        connection_class: type = AsyncLocalConnection
    else:
        import redis

        from ctxstore.store.local.connections import LocalConnection

        client = redis.Redis(unix_socket_path=socket_path, **options)
        connection_class = LocalConnection
    pool = client.connection_pool
    pool.connection_class = connection_class
    pool.connection_kwargs["local_server"] = server
    return client
