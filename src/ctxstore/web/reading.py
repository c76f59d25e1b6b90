"""What each page of the console shows, read from one namespace's store, read-only.

Every function here is an operation (a generator of calls, run by
:meth:`~ctxstore.web.tenants.Tenants.run`), so a sync and an async store serve it alike, and
each page costs a known number of round trips: the chats page two (the listing, then every
listed chat's size, live stream and turn lease in one), a chat page one (the graph window).
Nothing here writes: the listing runs without its repairs, and no read script slides a chat's
retention.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from ctxstore._core.ops import listing, reads
from ctxstore._core.ops.streams import active_stream
from ctxstore._core.protocol import Operation, command_call, together
from ctxstore._core.state import StoreState
from ctxstore.errors import CtxStoreError
from ctxstore.models import ChainSize, ChatInfo

#: Chats a page lists.
PAGE_SIZE = 50
#: Chats a title/id search reads at most per request (it goes on from a cursor after that).
SEARCH_BUDGET = 2_000


@dataclass(frozen=True)
class Lease:
    """A turn lease as the chat hash holds it: fencing token, holder, expiry (epoch ms)."""

    fence: int
    holder: str
    expires_at: int

    @property
    def held(self) -> bool:
        return self.expires_at > time.time() * 1000


@dataclass(frozen=True)
class ChatRow:
    """One line of the chats page."""

    chat: ChatInfo
    size: ChainSize | None
    streaming: str | None
    lease: Lease | None
    compaction_pending: bool


@dataclass(frozen=True)
class ChatsPage:
    rows: tuple[ChatRow, ...]
    next_cursor: str | None
    skipped: tuple[str, ...]
    #: Chats read to find these rows (a search reads more than it shows).
    scanned: int


def chats_page(
    state: StoreState,
    *,
    cursor: str | None = None,
    user_id: str | None = None,
    query: str | None = None,
    limit: int = PAGE_SIZE,
) -> Operation[ChatsPage]:
    """A page of chats newest first (of ``user_id``'s when given); with ``query``, only those
    whose title or id contains it (case-insensitive), reading at most ``SEARCH_BUDGET`` chats
    before it returns what it found and the cursor to search on from."""
    found: list[ChatInfo] = []
    skipped: list[str] = []
    scanned = 0
    needle = query.casefold() if query else None
    while True:
        page = yield from listing.list_chats_page(
            state,
            user_id=user_id,
            cursor=cursor,
            limit=limit if needle is None else 200,
            repair=False,
        )
        scanned += len(page.chats) + len(page.skipped)
        skipped += page.skipped
        if needle is None:
            found = list(page.chats)
            cursor = page.next_cursor
            break
        for info in page.chats:
            if needle in info.id.casefold() or needle in (info.title or "").casefold():
                found.append(info)
        cursor = page.next_cursor
        if cursor is None or len(found) >= limit or scanned >= SEARCH_BUDGET:
            break
    rows = yield from _rows(state, found)
    return ChatsPage(tuple(rows), cursor, tuple(skipped), scanned)


def _rows(state: StoreState, chats: list[ChatInfo]) -> Operation[list[ChatRow]]:
    """Each chat's active-branch size, live stream and turn lease: one round trip for all."""
    if not chats:
        return []
    operations: list[Operation[Any]] = []
    for info in chats:
        operations.append(reads.branch_size(state, info.id))
        operations.append(active_stream(state, info.id))
        operations.append(_chat_fields(state, info.id))
    outcomes = yield from together(operations)
    rows = []
    for index, info in enumerate(chats):
        size, stream, fields = outcomes[3 * index : 3 * index + 3]
        lease, job = fields if not isinstance(fields, CtxStoreError) else (None, False)
        rows.append(
            ChatRow(
                chat=info,
                size=None if isinstance(size, CtxStoreError) else size,
                streaming=None if isinstance(stream, CtxStoreError) else stream,
                lease=lease,
                compaction_pending=job,
            )
        )
    return rows


def _chat_fields(state: StoreState, chat_id: str) -> Operation[tuple[Lease | None, bool]]:
    """The chat's turn lease and whether a compaction job is pending (its ``cjob`` marker)."""
    key = state.keyspace.chat(chat_id).key("chat")
    turn, job = yield command_call(("HMGET", key, "turn", "cjob"), (key,))
    return parse_lease(turn), bool(job)


def parse_lease(raw: Any) -> Lease | None:
    """``<fence>\\t<holder token>\\t<expires>`` or nothing; anything else reads as no lease."""
    if not raw:
        return None
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
    parts = text.split("\t")
    if len(parts) != 3 or not parts[0].isdigit() or not parts[2].isdigit():
        return None
    return Lease(int(parts[0]), parts[1], int(parts[2]))


def chat_lease(state: StoreState, chat_id: str) -> Operation[Lease | None]:
    """The chat's turn lease, if one was ever taken."""
    lease, _job = yield from _chat_fields(state, chat_id)
    return lease
