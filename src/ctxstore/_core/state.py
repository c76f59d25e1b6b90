"""What every operation of a store reads besides its arguments (:class:`StoreState`), and what
the stores of one process share per server (:class:`ServerRegistry`).

A store's state is its settings (frozen, :class:`~ctxstore.settings.Settings`), what they
determine (key names, the clock, the token counter, the durability), the server's topology (a
Cluster or not, its identity for the shared caches), the process caches it shares with the
other stores of its server, and the one-shot checks still due. Internal: operations of
``ctxstore._core`` take it; it is no stable API.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from ctxstore._base.bounded import BoundedMap
from ctxstore._core.cache import ChainCache
from ctxstore._core.dispatch import LuaDispatch
from ctxstore._core.durability import Durability
from ctxstore._core.format.sealed import Places
from ctxstore._core.format.versions import MARKER_RECHECK_SECONDS, KeyspaceMarker
from ctxstore._core.keyring import DataKeyCache
from ctxstore._core.keys import Keyspace
from ctxstore.messages.tokens import MessageCounting, message_counter
from ctxstore.settings import DEFAULT_CACHE_BYTES, Limits, ScriptingMode, Settings


def wall_clock_ms() -> int:
    """Epoch milliseconds. Scripts get the time in ARGV, so tests can pass a fake clock."""
    return time.time_ns() // 1_000_000


class OwnerCache(BoundedMap[str, str]):
    """Chat id -> owner, learned from replies; bounded, least recently used out first.

    A chat's owner never changes, so a cached owner is safe to use for index maintenance; a
    chat deleted and re-created by someone else at worst leaves a stale index entry, which
    listings repair. Stores of one process on the same server and keyspace share one cache
    (see :class:`ServerRegistry`), so it is locked.
    """

    def remember(self, chat_id: str, owner: str) -> None:
        if self.get(chat_id) != owner:  # the usual case: nothing to learn
            self.put(chat_id, owner)

    def forget(self, chat_id: str) -> None:
        self.pop(chat_id)


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


@dataclass
class ProcessCaches:
    """What the stores of one server and keyspace share within a process: the owners of chats
    (for index maintenance) and the chains read (see :mod:`ctxstore._core.cache`)."""

    owners: OwnerCache = field(default_factory=OwnerCache)
    chains: ChainCache = field(default_factory=ChainCache)
    #: The users' data keys, unwrapped (stores with encryption; :mod:`ctxstore._core.keyring`).
    data_keys: DataKeyCache = field(default_factory=DataKeyCache)
    #: Where sealed chats' logs end, for the place an append seals its records for.
    places: Places = field(default_factory=Places)
    #: The keyspace's format marker as last read (None: not read yet, or refused).
    marker: KeyspaceMarker | None = None
    #: When the marker was read (monotonic seconds): it is read again after
    #: ``MARKER_RECHECK_SECONDS``, so a ``migrate`` reaches every process within that long.
    marker_read_at: float = float("-inf")

    def marker_due(self) -> bool:
        """Whether the next operation reads the keyspace's marker first."""
        return time.monotonic() - self.marker_read_at >= MARKER_RECHECK_SECONDS

    def remember_marker(self, marker: KeyspaceMarker | None) -> None:
        """Keep what was read; None (a marker this release refuses) is read again next time."""
        self.marker = marker
        self.marker_read_at = time.monotonic() if marker is not None else float("-inf")


class ServerRegistry:
    """What the stores of this process learned about each server: its caches (by server and
    keyspace) and the checks it passed.

    Short-lived stores (one per request in a serverless function or a web handler) would
    otherwise pay the eviction check and the owner lookups again on every request. Bounded,
    least recently used out first: a process that connects to many servers (a URL per tenant)
    keeps the newest :attr:`capacity` of them, never all.
    """

    def __init__(self, capacity: int = 64) -> None:
        self.capacity = capacity
        self._caches: OrderedDict[str, ProcessCaches] = OrderedDict()
        self._checked: OrderedDict[str, None] = OrderedDict()
        self._dispatch: OrderedDict[str, LuaDispatch] = OrderedDict()
        self._lock = threading.Lock()

    def caches(
        self, server: str | None, base: str, cache_bytes: int | None, *, sealed: bool = False
    ) -> ProcessCaches:
        """The caches of ``server`` + keyspace ``base``, made with a chain cache of
        ``cache_bytes`` (None: the default) by the first store that asks; private ones when
        ``server`` is None (a client passed in, a private embedded store) or the cache is off.
        Stores with encryption (``sealed``) share theirs apart from the others: a chain they
        opened is never served to a store without the keys."""
        if server is None:
            bound = DEFAULT_CACHE_BYTES if cache_bytes is None else cache_bytes
            return ProcessCaches(chains=ChainCache(bound))
        name = f"{server}|{base}|{'sealed' if sealed else 'plain'}"
        with self._lock:
            caches = self._caches.get(name)
            if caches is None:
                bound = cache_bytes or DEFAULT_CACHE_BYTES
                caches = self._caches[name] = ProcessCaches(chains=ChainCache(bound))
            elif cache_bytes:
                caches.chains.max_bytes = cache_bytes
            self._caches.move_to_end(name)
            while len(self._caches) > self.capacity:
                self._caches.popitem(last=False)
            if cache_bytes == 0:  # this store reads without a cache; the others keep theirs
                return ProcessCaches(
                    owners=caches.owners,
                    chains=ChainCache(0),
                    data_keys=caches.data_keys,
                    places=caches.places,
                )
            return caches

    def dispatch(self, server: str | None, mode: ScriptingMode) -> LuaDispatch:
        """How calls reach ``server``'s Lua with ``mode``: decided once per server and mode for
        the stores of this process (a private one when ``server`` is None)."""
        if server is None or mode == "scripts":
            return LuaDispatch(mode)
        name = f"{server}|{mode}"
        with self._lock:
            dispatch = self._dispatch.get(name)
            if dispatch is None:
                dispatch = self._dispatch[name] = LuaDispatch(mode)
            self._dispatch.move_to_end(name)
            while len(self._dispatch) > self.capacity:
                self._dispatch.popitem(last=False)
            return dispatch

    def all_caches(self) -> list[ProcessCaches]:
        """The caches of every server and keyspace this process knows now."""
        with self._lock:
            return list(self._caches.values())

    def checked(self, what: str | None) -> bool:
        """Whether a check named ``what`` (a server and the check) passed in this process."""
        with self._lock:
            return what is not None and what in self._checked

    def mark_checked(self, what: str | None) -> None:
        if what is None:
            return
        with self._lock:
            self._checked[what] = None
            self._checked.move_to_end(what)
            while len(self._checked) > self.capacity * 4:
                self._checked.popitem(last=False)


#: The registry of this process.
REGISTRY = ServerRegistry()


@dataclass
class StoreState:
    """Everything an operation needs besides its arguments (see the module docstring)."""

    settings: Settings = field(default_factory=Settings)
    #: Key names for the settings' prefix and namespace.
    keyspace: Keyspace = field(default_factory=Keyspace)
    #: Epoch milliseconds (the settings' clock, or the wall clock).
    clock: Callable[[], int] = wall_clock_ms
    #: Counts each message's tokens at save (the settings' token model or counter).
    message_tokens: MessageCounting = field(default_factory=message_counter)
    #: Shared with the other stores of this server and keyspace.
    caches: ProcessCaches = field(default_factory=ProcessCaches)
    #: The size of the chain at the heads this store's appends left.
    head_sizes: HeadSizes = field(default_factory=HeadSizes)
    #: Identifies the server for process-wide caches; None keeps this store's caches private.
    server: str | None = None
    #: A Redis Cluster: the chat indexes live on other nodes than the chat, so scripts cannot
    #: move them and they are sent beside the script instead.
    cluster: bool = False
    #: The embedded store (fakeredis): no server, no files, no replicas.
    embedded: bool = False
    #: What each write waits for before it is acknowledged (the settings' durability).
    durability: Durability | None = None
    #: Whether the eviction-policy check still has to run (servers only, once per process).
    check_server: bool = True
    #: Whether the server still has to show it has the wait command (once per process).
    check_durability: bool = False
    #: The retention of the chats this store creates, in milliseconds (None: they never expire).
    default_ttl_ms: int | None = None
    #: A store without encryption that shows a sealed chat with its values left closed (its
    #: graph and counts, not its text: the web console without keys) instead of refusing it.
    show_closed: bool = False
    #: Such a store's memory of which chats are sealed: (chat id, incarnation) -> sealed.
    sealed_chats: BoundedMap[tuple[str, str], bool] = field(default_factory=BoundedMap)
    #: Whether calls go as the library's functions or as scripts (shared per server).
    lua: LuaDispatch = field(default_factory=LuaDispatch)

    @property
    def limits(self) -> Limits:
        """The settings' safety bounds."""
        return self.settings.limits

    @limits.setter
    def limits(self, limits: Limits) -> None:
        """New bounds for this store from now on (tests tighten them on a live store)."""
        self.settings = dataclasses.replace(self.settings, limits=limits)

    @property
    def owners(self) -> OwnerCache:
        return self.caches.owners

    @property
    def cache(self) -> ChainCache:
        """The chains this process has read (shared by the stores of one server and keyspace)."""
        return self.caches.chains

    @property
    def checks_due(self) -> bool:
        """Whether the next operation starts with the server checks (the keyspace's format
        marker is one of them, read again every ``MARKER_RECHECK_SECONDS``)."""
        return self.check_server or self.check_durability or self.caches.marker_due()
