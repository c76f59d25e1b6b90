"""What ``connect`` and ``connect_async`` share: the client and the store state for a target."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ctxstore._core.durability import Durability, durability_of
from ctxstore._core.keys import Keyspace
from ctxstore._core.server_checks import durability_checked_key
from ctxstore._core.state import REGISTRY, StoreState, wall_clock_ms
from ctxstore.errors import ConfigurationError
from ctxstore.messages.tokens import message_counter
from ctxstore.settings import SETTINGS_FIELDS, Settings, scripting_of, settings_of
from ctxstore.store.connection import (
    DEFAULT_SOCKET_TIMEOUT,
    Target,
    adopt_client,
    is_cluster_client,
    is_memory_client,
    make_client,
    parse_url,
    socket_timeout_of,
)
from ctxstore.store.options import check_client_options, client_option_names, split_overrides


def configured(
    url: str | Any | None,
    settings: Settings | None,
    overrides: Mapping[str, Any],
    *,
    asynchronous: bool,
) -> tuple[Target | None, Settings]:
    """The target of ``url`` (None for a client passed in) and the settings ``connect(url,
    settings=..., **overrides)`` stands for, every keyword checked (see
    :mod:`ctxstore.store.options`) before any client exists."""
    target = parse_url(url) if url is None or isinstance(url, str) else None
    names = client_option_names(target.kind if target else "server", asynchronous=asynchronous)
    own, passed_on = split_overrides(overrides, SETTINGS_FIELDS, names, asynchronous=asynchronous)
    if passed_on:
        base = settings.redis_options if isinstance(settings, Settings) else {}
        own["redis_options"] = {**own.get("redis_options", base), **passed_on}
    checked = settings_of(settings, own)
    if target is None and checked.redis_options:
        raise TypeError(
            "redis_options are for the client a store makes from a URL; this store was given "
            "a client: set its options where it is made"
        )
    if target is not None:
        check_client_options(
            checked.redis_options, names, asynchronous=asynchronous, url=target.url
        )
    return target, checked


def store_parts(
    url: str | Any | None,
    *,
    asynchronous: bool,
    settings: Settings | None,
    overrides: Mapping[str, Any],
) -> tuple[Any, StoreState, bool]:
    """(client, state, whether the store owns the client) for a URL or an existing client.

    Every setting and keyword is checked first, so a bad namespace or a misspelled option fails
    before any client is made. Stores made from the same URL share what they learn (chat owners,
    chains read, the eviction check) within the process (see
    :class:`~ctxstore._core.state.ServerRegistry`); stores around a client passed in keep theirs
    private.
    """
    target, settings = configured(url, settings, overrides, asynchronous=asynchronous)
    keyspace = Keyspace(prefix=settings.prefix, namespace=settings.namespace)
    options = dict(settings.redis_options)
    if target is not None:
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
        caches=REGISTRY.caches(
            server, keyspace.base, settings.cache_bytes, sealed=settings.encryption is not None
        ),
        server=server,
        cluster=is_cluster_client(client),
        embedded=is_memory_client(client),
        durability=durable,
        check_server=not is_memory_client(client) and not REGISTRY.checked(server),
        default_ttl_ms=settings.ttl_ms,
        # Per server and Redis user: one user's ACL may refuse what another's allows.
        lua=REGISTRY.dispatch(
            server and f"{server}|{options.get('username') or ''}",
            scripting_of(settings.scripting),
        ),
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
