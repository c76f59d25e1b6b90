"""The per-store state every operation reads: key names, limits, the clock, the owner cache."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from ctxstore._core.cache import DEFAULT_CACHE_BYTES, ChainCache
from ctxstore._core.durability import Durability
from ctxstore._core.keys import Keyspace
from ctxstore.messages.tokens import MessageCounter, message_counter
from ctxstore.settings import Limits


def wall_clock_ms() -> int:
    """Epoch milliseconds. Scripts get the time in ARGV, so tests can pass a fake clock."""
    return time.time_ns() // 1_000_000


class OwnerCache:
    """Chat id -> owner, learned from replies; bounded, least recently used out first.

    A chat's owner never changes, so a cached owner is safe to use for index maintenance; a
    chat deleted and re-created by someone else at worst leaves a stale index entry, which
    listings repair. Stores of one process on the same server and keyspace share one cache
    (see :func:`shared_owner_cache`), so it is locked.
    """

    def __init__(self, capacity: int = 10_000) -> None:
        self._capacity = capacity
        self._owners: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, chat_id: str) -> str | None:
        with self._lock:
            owner = self._owners.get(chat_id)
            if owner is not None:
                self._owners.move_to_end(chat_id)
            return owner

    def remember(self, chat_id: str, owner: str) -> None:
        if self._owners.get(chat_id) == owner:  # the usual case: nothing to learn
            return
        with self._lock:
            self._owners[chat_id] = owner
            self._owners.move_to_end(chat_id)
            while len(self._owners) > self._capacity:
                self._owners.popitem(last=False)

    def forget(self, chat_id: str) -> None:
        with self._lock:
            self._owners.pop(chat_id, None)


class HeadSizes:
    """(chat, head message id) -> the chain's tokens through that head, as the last append
    left it. A save onto that head then sends its token entries ready to store (the append
    script checks the size and falls back to shifting them when it was wrong). Bounded; a miss
    costs Redis one pass over the new entries, never a wrong count."""

    def __init__(self, capacity: int = 10_000) -> None:
        self._capacity = capacity
        self._sizes: OrderedDict[str, tuple[str, int]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, chat_id: str, head: str) -> int:
        found = self._sizes.get(chat_id)
        return found[1] if found is not None and found[0] == head else 0

    def remember(self, chat_id: str, head: str, tokens: int) -> None:
        if tokens < 0:
            return
        with self._lock:
            self._sizes[chat_id] = (head, tokens)
            self._sizes.move_to_end(chat_id)
            while len(self._sizes) > self._capacity:
                self._sizes.popitem(last=False)


# Process-wide memory of what stores learned about a server. Short-lived stores (one per
# request in a serverless function or a web handler) would otherwise pay the eviction check and
# the owner lookups again on every request.
_registry_lock = threading.Lock()
_owner_caches: dict[str, OwnerCache] = {}
_chain_caches: dict[str, ChainCache] = {}
_checked_servers: set[str] = set()


def shared_owner_cache(server: str | None, base: str) -> OwnerCache:
    """The owner cache of ``server`` + keyspace ``base``; a private one when ``server`` is None."""
    if server is None:
        return OwnerCache()
    with _registry_lock:
        return _owner_caches.setdefault(f"{server}|{base}", OwnerCache())


def shared_chain_cache(server: str | None, base: str, max_bytes: int | None) -> ChainCache:
    """The chain cache of ``server`` + keyspace ``base``, made with ``max_bytes`` (default 32 MiB)
    by the first store that asks; a private one when ``server`` is None or ``max_bytes`` is 0."""
    if server is None or max_bytes == 0:
        return ChainCache(DEFAULT_CACHE_BYTES if max_bytes is None else max_bytes)
    with _registry_lock:
        cache = _chain_caches.get(f"{server}|{base}")
        if cache is None:
            cache = ChainCache(DEFAULT_CACHE_BYTES if max_bytes is None else max_bytes)
            _chain_caches[f"{server}|{base}"] = cache
        elif max_bytes is not None:
            cache.max_bytes = max_bytes
        return cache


def server_checked(server: str | None) -> bool:
    with _registry_lock:
        return server is not None and server in _checked_servers


def mark_server_checked(server: str | None) -> None:
    if server is not None:
        with _registry_lock:
            _checked_servers.add(server)


@dataclass
class StoreState:
    """Everything an operation needs besides its arguments."""

    keyspace: Keyspace = field(default_factory=Keyspace)
    limits: Limits = field(default_factory=Limits)
    clock: Callable[[], int] = wall_clock_ms
    owners: OwnerCache = field(default_factory=OwnerCache)
    #: Counts each message's tokens at save (``connect(token_model=..., estimate_tokens=...)``).
    message_tokens: MessageCounter = field(default_factory=message_counter)
    #: The size of the chain at the heads this store's appends left.
    head_sizes: HeadSizes = field(default_factory=HeadSizes)
    #: Whether the eviction-policy check still has to run (servers only, once per process).
    check_server: bool = True
    #: Identifies the server for process-wide caches; None keeps this store's caches private.
    server: str | None = None
    #: Chains this process has read (shared by the stores of one server and keyspace).
    cache: ChainCache = field(default_factory=ChainCache)
    #: A Redis Cluster: the chat indexes live on other nodes than the chat, so scripts cannot
    #: move them and they are sent beside the script instead.
    cluster: bool = False
    #: What each write waits for before it is acknowledged (``connect(durability=...)``).
    durability: Durability | None = None
    #: Whether the server still has to show it has the wait command (once per process).
    check_durability: bool = False
    #: The retention of the chats this store creates, in milliseconds (``connect(ttl=)``);
    #: None: they never expire.
    default_ttl_ms: int | None = None

    @property
    def checks_due(self) -> bool:
        """Whether the next operation starts with the server checks."""
        return self.check_server or self.check_durability
