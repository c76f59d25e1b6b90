"""What ``connect`` and ``connect_async`` share: the client and the store state for a target."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ctxstore._core.durability import DEFAULT_DURABILITY_TIMEOUT, Durability, durability_setting
from ctxstore._core.keys import Keyspace
from ctxstore._core.server_checks import durability_checked_key
from ctxstore._core.state import (
    StoreState,
    server_checked,
    shared_chain_cache,
    shared_owner_cache,
    wall_clock_ms,
)
from ctxstore.errors import ConfigurationError
from ctxstore.messages.tokens import TokenCounter, message_counter
from ctxstore.settings import TTL, Limits, ttl_ms
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
    url: str | Any | None,
    *,
    asynchronous: bool,
    namespace: str | None,
    prefix: str,
    limits: Limits | None,
    clock: Callable[[], int] | None,
    options: dict[str, Any],
    cache_bytes: int | None = None,
    token_model: str | None = None,
    estimate_tokens: TokenCounter | None = None,
    durability: object = None,
    durability_timeout: object = DEFAULT_DURABILITY_TIMEOUT,
    ttl: TTL = None,
) -> tuple[Any, StoreState, bool]:
    """(client, state, whether the store owns the client) for a URL or an existing client.

    The keyspace is validated before any client is made, so a bad namespace fails fast. Stores
    made from the same URL share what they learn (chat owners, chains read, the eviction check)
    within the process; stores around a client passed in keep theirs private.
    """
    if cache_bytes is not None and (
        isinstance(cache_bytes, bool) or not isinstance(cache_bytes, int) or cache_bytes < 0
    ):
        raise ConfigurationError(f"cache_bytes must be a non-negative integer, got {cache_bytes!r}")
    counter = message_counter(token_model, estimate_tokens)
    default_ttl = ttl_ms(ttl)
    keyspace = Keyspace(prefix=prefix, namespace=namespace)
    if url is None or isinstance(url, str):
        target = parse_url(url)
        durable = _durability(
            durability,
            durability_timeout,
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
            durability,
            durability_timeout,
            embedded=is_memory_client(client),
            socket_timeout=socket_timeout_of(client),
        )
        owns = False
        server = None
    state = StoreState(
        keyspace=keyspace,
        limits=limits or Limits(),
        clock=clock or wall_clock_ms,
        owners=shared_owner_cache(server, keyspace.base),
        check_server=not is_memory_client(client) and not server_checked(server),
        server=server,
        cache=shared_chain_cache(server, keyspace.base, cache_bytes),
        cluster=is_cluster_client(client),
        message_tokens=counter,
        durability=durable,
        default_ttl_ms=default_ttl,
    )
    state.check_durability = durable is not None and not server_checked(
        durability_checked_key(state)
    )
    return client, state, owns


def _durability(
    mode: object, timeout: object, *, embedded: bool, socket_timeout: float | None
) -> Durability | None:
    """The durability setting, refused on the embedded store: it keeps everything in this
    process, with no replica to wait for and no file to fsync, so a write there can never be
    what ``durability=`` promises (saying yes would promise what a crash takes away)."""
    durable = durability_setting(mode, timeout, socket_timeout)
    if durable is not None and embedded:
        raise ConfigurationError(
            f"durability={durable.mode!r} needs a Redis server: the embedded store (memory://) "
            "keeps its data in this process only, with no replica and no append-only file"
        )
    return durable
