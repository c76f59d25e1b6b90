"""A chat's active branch seen as one list of messages: what every adapter needs.

Frameworks keep a conversation as a list they read, extend, shorten by one and clear. Here that
list is the chain of the chat's active branch, and each verb is one core operation (a generator
of calls), so a sync :class:`~ctxstore.store.Store` and an :class:`~ctxstore.store.async_store.
AsyncStore` run the same logic; on a sync store the async verbs run in a worker thread.

- read: the active branch's chain (the newest ``limit`` messages), one round trip; a missing
  chat reads as empty and is not created by a read.
- extend: one append to whatever branch is active when the script runs, with compare-and-set
  and ``on_conflict="rebase"``: concurrent writers all land, none is lost. The chat is created
  (owned by ``user_id``) by the first write that finds it missing.
- shorten by one (pop): a rewind. The newest message stays in the graph; a new branch starts at
  its parent and becomes the active one, by compare-and-set on the active branch and its head:
  two pops at once take two distinct messages (or one finds the branch empty), never the same
  one twice.
- clear: the chat is deleted, every branch with it; the next write creates it anew.

Payloads are appended as :class:`~ctxstore.models.NewMessage` without an id: ids inside a
framework's items (``"id": "__fake_id__"``, ``"msg_..."``) stay payload and never become
ctxstore message ids.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from ctxstore._base.ids import check_key_id
from ctxstore._core.ids import hashed_id, id_hasher, new_request_id
from ctxstore._core.ops import append as append_ops
from ctxstore._core.ops import reads
from ctxstore._core.ops.branches import create_branch
from ctxstore._core.ops.chats import delete_chat
from ctxstore._core.ops.opening import upsert_chat
from ctxstore._core.protocol import Operation
from ctxstore.errors import (
    ChatNotFoundError,
    ChatReplacedError,
    ConfigurationError,
    HeadConflictError,
    ScopeError,
    ValidationError,
)
from ctxstore.models import NewMessage
from ctxstore.store.async_store import AsyncStore
from ctxstore.store.scoped import AsyncUserStore, UserStore, acting_as
from ctxstore.store.sync_store import Store, connect

T = TypeVar("T")

#: How often an append retries after creating the chat it found missing (a chat deleted again
#: in between, by a clear on another worker, is created again the next time).
_CREATE_ATTEMPTS = 3
#: The ``-v<k>`` an auto-named branch ends with (a pop numbers its branches from the name
#: without it).
_SUFFIX = re.compile(r"-v[0-9]+\Z")
#: How often a pop reads the newest message again after another writer moved the branch
#: between its read and its compare-and-set.
_POP_ATTEMPTS = 20


def open_store(
    store: Store | AsyncStore | UserStore | AsyncUserStore | None,
    url: str | None,
    owner: str,
    user_id: str | None,
) -> tuple[Store | AsyncStore, str]:
    """The store an adapter uses and the user it acts as: the store given (a user's handle
    names the user), or a sync store for ``url`` (None reads ``CTXSTORE_URL``; neither is a
    ConfigurationError); a sync store serves any event loop. A session is one user's: without
    a user (``user_id=`` or a handle) it is a ScopeError."""
    if store is not None and url is not None:
        raise ConfigurationError(f"{owner} takes store= or url=, not both")
    if store is not None:
        opened, acting = acting_as(owner, store, user_id, (Store, AsyncStore))
        return opened, str(acting)  # never None: acting_as refuses "anyone" unless allowed
    if user_id is None:
        raise ScopeError(f"{owner} acts for one user: pass user_id=... (checked before connecting)")
    return connect(url), user_id


class BranchLog:
    """One chat's active branch for one user, as a list of payloads (see the module)."""

    def __init__(self, store: Store | AsyncStore, chat_id: str, user_id: str) -> None:
        self.store = store
        self.chat_id = chat_id
        self.user_id = check_key_id(user_id, "user_id")
        store.state.keyspace.chat(chat_id)  # an id that cannot name a chat fails here
        self._head: str | None = None  # the newest head seen: a hint for the next append
        # The incarnation of the chat this log has seen (read or written): its writes carry it,
        # so once the chat is deleted (or erased) they fail instead of creating it again.
        self._incarnation: str | None = None
        self._nonce = new_request_id()  # this log's part of its writes' request ids

    # --- running -------------------------------------------------------------------------------

    def run(self, operation: Operation[T]) -> T:
        """Run on a sync store; an AsyncStore cannot be driven from sync code."""
        if not isinstance(self.store, Store):
            operation.close()
            raise ConfigurationError(
                "this call is synchronous and the store is an AsyncStore: use the async "
                "methods, or pass a sync Store (ctxstore.connect)"
            )
        return self.store.run(operation)

    async def arun(self, operation: Operation[T]) -> T:
        """Run on an AsyncStore, or on a sync store in a worker thread."""
        if isinstance(self.store, AsyncStore):
            return await self.store.run(operation)
        return await asyncio.to_thread(self.store.run, operation)

    # --- operations ----------------------------------------------------------------------------

    def read(self, limit: int | None = None) -> Operation[list[dict[str, Any]]]:
        """The payloads of the active branch, root first: all of them, or the newest ``limit``
        (none for ``limit`` <= 0). Copies: the caller may change them."""
        chain = yield from self._chain(limit)
        return [] if chain is None else list(chain.payloads())

    def read_stored(self, limit: int | None = None) -> Operation[list[dict[str, Any]]]:
        """:meth:`read`'s messages as stored: each a dict with its ``message`` (the payload) and,
        where it was appended with some, its ``metadata``. Copies."""
        chain = yield from self._chain(limit)
        if chain is None:
            return []
        return [
            {"message": item["message"], "metadata": item.get("metadata")}
            for item in chain.messages()
        ]

    def _chain(self, limit: int | None) -> Operation[Any]:
        """The active branch's chain (the newest ``limit`` messages), None when there is none
        to read (no chat, or ``limit`` <= 0)."""
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)):
            raise ValidationError(f"limit must be an integer or None, got {limit!r}")
        if limit is not None and limit <= 0:
            return None
        window = reads.Window(newest=True) if limit else reads.WHOLE_CHAIN
        try:
            info, chain, _reply = yield from reads.read_branch(
                self.store.state,
                self.chat_id,
                None,
                max_depth=limit,
                window=window,
                user_id=self.user_id,
            )
        except ChatNotFoundError:
            return None
        self._head = info.head_message_id
        self._incarnation = chain.incarnation
        return chain

    def extend(
        self,
        payloads: Sequence[Mapping[str, Any]],
        metadata: Sequence[Mapping[str, Any] | None] | None = None,
        *,
        any_items: bool = False,
    ) -> Operation[None]:
        """Append ``payloads`` in order to the active branch (creating the chat if missing
        and this log has not seen it: a chat it saw that is gone since, deleted or erased
        elsewhere, is a :class:`~ctxstore.errors.ChatReplacedError`, and nothing is written),
        each with its ``metadata`` (stored beside the payload, read back by :meth:`read_stored`).
        ``any_items``: payloads with neither ``role`` nor ``type`` are stored as they are.

        Safe to retry: the write's request id comes from this log, the head it last saw and
        the items, so the same items added again by this session after a failure (a timeout
        whose write went through) are applied once, while another session's, or the next add
        (the head has moved), are writes of their own. The frameworks' session protocols have
        no place for a caller's request id; this needs none."""
        extras = metadata if metadata is not None else [None] * len(payloads)
        batch = [
            NewMessage(payload, metadata=extra)
            for payload, extra in zip(payloads, extras, strict=True)
        ]
        if not batch:
            return
        state = self.store.state
        for attempt in range(_CREATE_ATTEMPTS):
            try:
                result = yield from append_ops.append(
                    state,
                    self.chat_id,
                    None,
                    batch,
                    expected_head=self._head,
                    on_conflict="rebase",
                    user_id=self.user_id,
                    any_items=any_items,
                    incarnation=self._incarnation,
                    request_id=self._request_for(payloads, extras),
                    recall=False,  # a retry comes after the write moved the head: found then
                )
            except ChatReplacedError:
                raise  # the chat this log saw is gone: never brought back by a late write
            except ChatNotFoundError:
                if attempt == _CREATE_ATTEMPTS - 1:
                    raise
                self._head = None
                meta = yield from upsert_chat(state, self.chat_id, self.user_id)
                self._incarnation = meta.incarnation
                continue
            self._head = result.head_message_id
            self._incarnation = result.incarnation
            return

    def _request_for(
        self, payloads: Sequence[Mapping[str, Any]], extras: Sequence[Mapping[str, Any] | None]
    ) -> str:
        """The request id of an add: this log's own nonce, the head it expects and the items."""
        hasher = id_hasher()
        hasher.update(f"{self._nonce}\t{self._head or ''}\t".encode())
        body = json.dumps([list(payloads), list(extras)], sort_keys=True, default=repr)
        hasher.update(body.encode())
        return hashed_id(hasher)

    def pop(self) -> Operation[dict[str, Any] | None]:
        """Move the active branch back by one message: a new branch (activated) at the newest
        message's parent. Returns that message, None when the branch is empty; the message
        stays in the graph, on the branch it was popped from.

        The new branch is a sibling, not a child: pops from ``main``, then ``main-v2``, then
        ``main-v3`` make ``main-v2``, ``main-v3``, ``main-v4`` (the name's own ``-v<n>`` is
        dropped before numbering), so a session popped a thousand times keeps short names
        instead of nesting one ``-v<k>`` per pop."""
        state = self.store.state
        for attempt in range(_POP_ATTEMPTS):
            try:
                info, chain, _reply = yield from reads.read_branch(
                    state,
                    self.chat_id,
                    None,
                    max_depth=1,
                    window=reads.Window(newest=True),
                    user_id=self.user_id,
                )
            except ChatNotFoundError:
                return None
            newest = chain.messages()
            if not newest:
                return None
            popped = newest[-1]
            try:
                branch = yield from create_branch(
                    state,
                    self.chat_id,
                    popped["parent_id"],
                    base=_SUFFIX.sub("", info.name),
                    activate=True,
                    user_id=self.user_id,
                    expected=(info.name, popped["id"]),
                )
            except HeadConflictError:
                if attempt == _POP_ATTEMPTS - 1:
                    raise
                continue  # another pop or append came first: read the newest again
            self._head = branch.head_message_id
            return popped["message"]  # the caller's: a copy (the chain's items are)
        return None  # not reached: the last attempt returns or raises

    def clear(self) -> Operation[bool]:
        """Delete the chat (True if this call deleted it); the log's next add starts a new one."""
        self._head = None
        self._incarnation = None
        deleted: bool = yield from delete_chat(self.store.state, self.chat_id, user_id=self.user_id)
        return deleted
