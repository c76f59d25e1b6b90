"""What ``connect`` and ``connect_async`` share: the client and the store state for a target."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ctxstore.connection import adopt_client, is_memory_client, make_client, parse_url
from ctxstore.core.keys import Keyspace
from ctxstore.core.state import Limits, StoreState, wall_clock_ms


def store_parts(
    url: str | Any | None,
    *,
    asynchronous: bool,
    namespace: str | None,
    prefix: str,
    limits: Limits | None,
    clock: Callable[[], int] | None,
    options: dict[str, Any],
) -> tuple[Any, StoreState, bool]:
    """(client, state, whether the store owns the client) for a URL or an existing client.

    The keyspace is validated before any client is made, so a bad namespace fails fast.
    """
    state = StoreState(
        keyspace=Keyspace(prefix=prefix, namespace=namespace),
        limits=limits or Limits(),
        clock=clock or wall_clock_ms,
    )
    if url is None or isinstance(url, str):
        client = make_client(parse_url(url), options, asynchronous=asynchronous)
        owns = True
    else:
        client = adopt_client(url, asynchronous=asynchronous)
        owns = False
    state.check_server = not is_memory_client(client)
    return client, state, owns
