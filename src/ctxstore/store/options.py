"""Which keyword arguments ``connect()`` takes, checked at the call.

``connect(url, settings=..., **overrides)``: an override names a field of
:class:`~ctxstore.settings.Settings`; the redis-py client's own options go in
``redis_options={...}``. Both are checked before any client exists, on every URL scheme, so a
misspelled keyword fails where it is written (``connect("memory://", namespce="t")``) instead
of being accepted by the embedded store in tests and refused by redis-py at the first call in
production.

A client option given as a plain keyword (``connect(url, socket_timeout=2)``, the 0.3
spelling) still works for this release, with a ``DeprecationWarning``, and only for names the
client ctxstore would make for that URL accepts; any other unknown keyword is a ``TypeError``
naming it, with the nearest known name when there is one.
"""

from __future__ import annotations

import difflib
import functools
import inspect
import warnings
from collections.abc import Mapping
from typing import Any

#: What ``connect()`` and ``connect_async()`` call themselves in messages.
_CALLERS = {False: "connect()", True: "connect_async()"}


@functools.cache
def client_option_names(kind: str, *, asynchronous: bool) -> frozenset[str]:
    """The keyword arguments of the redis-py client ctxstore makes for a URL of ``kind``
    (``memory``, ``local``, ``server``, ``cluster``): read from the client's signature, so they
    follow the installed redis-py. ``memory://`` takes a server's, which it ignores: one
    configuration serves the embedded store in tests and a server in production."""
    if kind == "cluster":
        if asynchronous:
            from redis.asyncio.cluster import RedisCluster as AsyncCluster

            return _parameters(AsyncCluster) - _CLUSTER_TARGETS
        from redis.cluster import RedisCluster

        # The sync cluster client passes what it does not take itself to each node's client.
        return (_parameters(RedisCluster) | client_option_names("server", asynchronous=False)) - (
            _CLUSTER_TARGETS
        )
    if asynchronous:
        import redis.asyncio

        return _parameters(redis.asyncio.Redis) - _SERVER_TARGETS
    import redis

    return _parameters(redis.Redis) - _SERVER_TARGETS


#: Options that say where the server is: the URL says it, and ctxstore owns the reply format.
_SERVER_TARGETS = frozenset(
    {"host", "port", "db", "unix_socket_path", "connection_pool", "single_connection_client"}
)
_CLUSTER_TARGETS = frozenset({"host", "port", "startup_nodes"})


def _parameters(cls: type) -> frozenset[str]:
    return frozenset(
        name
        for name, parameter in inspect.signature(cls).parameters.items()
        if parameter.kind not in (parameter.VAR_KEYWORD, parameter.VAR_POSITIONAL)
    )


def split_overrides(
    overrides: Mapping[str, Any],
    fields: frozenset[str],
    client_options: frozenset[str],
    *,
    asynchronous: bool,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the overrides that name a settings field, the client options given as plain keywords).

    A keyword that is neither is a ``TypeError`` naming it (Python's own wording, so it reads
    like any other bad keyword); a client option given that way warns that it belongs in
    ``redis_options``."""
    caller = _CALLERS[asynchronous]
    own: dict[str, Any] = {}
    passed_on: dict[str, Any] = {}
    for name, value in overrides.items():
        if name in fields:
            own[name] = value
        elif name in client_options:
            passed_on[name] = value
        else:
            raise TypeError(
                f"{caller} got an unexpected keyword argument {name!r}"
                + _nearest(name, fields | client_options)
                + "; a redis-py client option goes in redis_options={...}"
            )
    if passed_on:
        names = ", ".join(sorted(passed_on))
        warnings.warn(
            f"{caller}: pass the redis-py client options {names} as redis_options="
            f"{{...}}; client options as plain keywords stop working in the next release",
            DeprecationWarning,
            stacklevel=5,  # the caller of connect(): options, configured, store_parts, connect
        )
    return own, passed_on


def check_client_options(
    options: Mapping[str, Any], client_options: frozenset[str], *, asynchronous: bool, url: str
) -> None:
    """Refuse a ``redis_options`` name the client for ``url`` does not take (``TypeError``)."""
    for name in options:
        if not isinstance(name, str) or name not in client_options:
            raise TypeError(
                f"{_CALLERS[asynchronous]}: redis_options has {name!r}, which the redis-py "
                f"client for {url!r} does not take" + _nearest(str(name), client_options)
            )


def _nearest(name: str, known: frozenset[str]) -> str:
    close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.75)
    return f" (did you mean {close[0]!r}?)" if close else ""
