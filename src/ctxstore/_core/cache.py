"""The process cache of chains read: immutability makes every record a process has read true for
as long as its chat exists, so a worker serving many turns of one chat pays for the new messages
only, not for the chain again.

An entry is the whole chain up to one head (message dicts and their payloads), keyed by the chat
and by what was asked for (a branch, or a head id). A read sends the position of the chain it
holds and the incarnation it was read from; the script answers with only what follows that
position when the chain still passes through it, and with the whole chain otherwise (another
branch, a rewind, a chat deleted and re-created: a new incarnation never matches an old entry).

Entries share the message dicts they have in common; readers never get those dicts: a read's
chain is an :class:`~ctxstore._base.owned.OwnedList` over them, whose items are copied as they
are handed out, so what a caller changes is its own. The cache is bounded by an estimate of the
bytes it keeps alive; the least recently used chains go first. Stores made from the same URL in
one process share one cache.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from ctxstore._base.owned import OwnedList
from ctxstore.models import StoredMessage
from ctxstore.settings import DEFAULT_CACHE_BYTES

#: What one cached message costs beyond its record bytes: the dicts, their keys, list slots.
MESSAGE_OVERHEAD = 400
#: How much larger a decoded payload is than its msgpack record.
DECODED_FACTOR = 3


@dataclass(frozen=True)
class CachedChain:
    """A chain read from incarnation ``incarnation``, root first, ending at position ``head``.

    The chain is the first ``length`` items of ``shared_messages`` / ``shared_payloads``: lists
    that a later read of a longer chain through the same head extends in place (see
    :meth:`ChainCache.extend`), so a warm read copies the chain's references once, for its
    caller, instead of building new lists. Never hand those lists or their items out:
    :meth:`messages` and :meth:`payloads` give the caller an
    :class:`~ctxstore._base.owned.OwnedList`, whose items become the caller's own copies as they
    are handed out; :meth:`read_only_messages` is for code of ctxstore's that only reads.
    """

    incarnation: str
    head: int
    #: The tag of the record at ``head`` (a read checks it is still there).
    head_tag: str
    length: int
    shared_messages: list[StoredMessage]
    shared_payloads: list[dict[str, Any]]
    size: int
    #: The index of the chain's first UI message, -1 for none: found when the chain is built
    #: (a chain that grows scans only what it adds), so a resolve never scans the chain.
    first_ui: int = -1
    #: ``"~<rgen>"`` when the chat had a message redacted before this chain was read, else "":
    #: a read sends it with the incarnation, and a chain cached before a redaction is read
    #: again in full (see ``cache_id`` in ``lua/lib/reads.lua``).
    generation: str = ""

    def messages(self) -> list[StoredMessage]:
        """The chain's messages, root first: the caller's (see :class:`OwnedList`)."""
        return OwnedList.over(self.shared_messages, self.length)

    def payloads(self, then: Iterable[dict[str, Any]] = ()) -> list[dict[str, Any]]:
        """The chain's chat-message payloads, root first, followed by ``then`` (the caller's
        already): the caller's (see :class:`OwnedList`)."""
        return OwnedList.over(self.shared_payloads, self.length, then)

    def read_only_messages(self) -> list[StoredMessage]:
        """The chain's messages as the cache holds them, for code that reads and never hands
        them out nor changes them."""
        return self.shared_messages[: self.length]

    def newest_first(self) -> Iterator[StoredMessage]:
        """The messages from the head back to the root, without copying the chain."""
        items = self.shared_messages
        return (items[index] for index in range(self.length - 1, -1, -1))


#: A chain of no message.
EMPTY_CHAIN = CachedChain("", -1, "", 0, [], [], 0)


def estimated_size(record_bytes: int, count: int) -> int:
    """What ``count`` decoded messages of ``record_bytes`` msgpack bytes keep alive, roughly."""
    return DECODED_FACTOR * record_bytes + MESSAGE_OVERHEAD * count


class ChainCache:
    """Chains by (chat, what was read), least recently used out first, bounded by bytes."""

    def __init__(self, max_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[tuple[str, str], CachedChain] = OrderedDict()
        self._latest: dict[str, tuple[str, str]] = {}
        self._bytes = 0
        self._lock = threading.Lock()
        #: Lookups that found a chain, and that found none (the ``ctxstore.cache.*`` metrics).
        self.hits = 0
        self.misses = 0

    @property
    def size(self) -> int:
        """Estimated bytes held now."""
        return self._bytes

    def lookup(self, chat_id: str, key: str) -> CachedChain | None:
        """The chain read for ``key`` in this chat, else the chat's most recent one, else None.

        Any chain of the chat is a useful hint: the script reads only what follows it when the
        chain asked for passes through its head, and ignores it otherwise.
        """
        if self.max_bytes <= 0:
            return None
        with self._lock:
            slot = (chat_id, key)
            if slot not in self._entries:
                latest = self._latest.get(chat_id)
                if latest is None or latest not in self._entries:
                    self.misses += 1
                    return None
                slot = latest
            self.hits += 1
            self._entries.move_to_end(slot)
            return self._entries[slot]

    def store(self, chat_id: str, key: str, chain: CachedChain) -> None:
        """Keep ``chain`` as what ``key`` read; older entries go when the bound is passed."""
        if self.max_bytes <= 0 or chain.size > self.max_bytes:
            return
        with self._lock:
            slot = (chat_id, key)
            old = self._entries.pop(slot, None)
            if old is not None:
                self._bytes -= old.size
            self._entries[slot] = chain
            self._latest[chat_id] = slot
            self._bytes += chain.size
            while self._bytes > self.max_bytes and self._entries:
                (evicted_chat, evicted_key), evicted = self._entries.popitem(last=False)
                self._bytes -= evicted.size
                if self._latest.get(evicted_chat) == (evicted_chat, evicted_key):
                    del self._latest[evicted_chat]

    def extend(
        self,
        base: CachedChain,
        added: list[StoredMessage],
        added_payloads: list[dict[str, Any]],
    ) -> tuple[list[StoredMessage], list[dict[str, Any]]]:
        """The lists of ``base`` followed by ``added``: ``base``'s own lists extended in place
        when nothing was appended to them past ``base`` (every view of them stays valid, since
        a view is a prefix), else new lists."""
        with self._lock:
            if len(base.shared_messages) == base.length:
                base.shared_messages.extend(added)
                base.shared_payloads.extend(added_payloads)
                return base.shared_messages, base.shared_payloads
        return base.messages() + added, base.payloads() + added_payloads

    def forget(self, chat_id: str) -> None:
        """Drop every chain of a chat (it was deleted)."""
        with self._lock:
            for slot in [slot for slot in self._entries if slot[0] == chat_id]:
                self._bytes -= self._entries.pop(slot).size
            self._latest.pop(chat_id, None)

    def clear(self) -> None:
        """Drop everything: the next read of every chat reads the whole chain."""
        with self._lock:
            self._entries.clear()
            self._latest.clear()
            self._bytes = 0
