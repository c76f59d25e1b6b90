"""What ``connect`` and ``connect_async`` share: the client and the store state for a target."""

from __future__ import annotations

from typing import Any

from ctxstore._core.durability import Durability, durability_of
from ctxstore._core.keys import Keyspace
from ctxstore._core.server_checks import durability_checked_key
from ctxstore._core.state import REGISTRY, StoreState, wall_clock_ms
from ctxstore.errors import ConfigurationError
from ctxstore.messages.tokens import message_counter
from ctxstore.settings import Settings
from ctxstore.store.connection import (
    DEFAULT_SOCKET_TIMEOUT,
    adopt_client,
    is_cluster_client,
    is_memory_client,
    make_client,
    parse_url,
    socket_timeout_of,
)


def store_parts(
    url: str | Any | None, *, asynchronous: bool, settings: Settings
) -> tuple[Any, StoreState, bool]:
    """(client, state, whether the store owns the client) for a URL or an existing client.

    ``settings`` were checked when they were built, so a bad namespace fails before any client
    is made. Stores made from the same URL share what they learn (chat owners, chains read, the
    eviction check) within the process (see :class:`~ctxstore._core.state.ServerRegistry`);
    stores around a client passed in keep theirs private.
    """
    keyspace = Keyspace(prefix=settings.prefix, namespace=settings.namespace)
    options = dict(settings.redis_options)
    if url is None or isinstance(url, str):
        target = parse_url(url)
        durable = _durability(
            settings,
            embedded=target.kind == "memory",
            socket_timeout=options.get("socket_timeout", DEFAULT_SOCKET_TIMEOUT),
        )
        client = make_client(target, options, asynchronous=asynchronous)
        owns = True
        # A private memory:// store is a server of its own; anything else is named by its URL.
        server = None if target.kind == "memory" and not target.name else target.url
    else:
        client = adopt_client(url, asynchronous=asynchronous)
        durable = _durability(
            settings, embedded=is_memory_client(client), socket_timeout=socket_timeout_of(client)
        )
        owns = False
        server = None
    state = StoreState(
        settings=settings,
        keyspace=keyspace,
        clock=settings.clock or wall_clock_ms,
        message_tokens=message_counter(settings.token_model, settings.estimate_tokens),
        caches=REGISTRY.caches(server, keyspace.base, settings.cache_bytes),
        server=server,
        cluster=is_cluster_client(client),
        durability=durable,
        check_server=not is_memory_client(client) and not REGISTRY.checked(server),
        default_ttl_ms=settings.ttl_ms,
    )
    state.check_durability = durable is not None and not REGISTRY.checked(
        durability_checked_key(state)
    )
    return client, state, owns


def _durability(
    settings: Settings, *, embedded: bool, socket_timeout: float | None
) -> Durability | None:
    """The durability setting, refused on the embedded store: it keeps everything in this
    process, with no replica to wait for and no file to fsync, so a write there can never be
    what ``durability=`` promises (saying yes would promise what a crash takes away)."""
    durable = durability_of(settings, socket_timeout)
    if durable is not None and embedded:
        raise ConfigurationError(
            f"durability={durable.mode!r} needs a Redis server: the embedded store (memory://) "
            "keeps its data in this process only, with no replica and no append-only file"
        )
    return durable
