"""Message operations: append (with head compare-and-set), read one, read a chain."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, get_args

import msgpack

from ctxstore.core.cache import CachedChain, estimated_size
from ctxstore.core.chain import (
    ChainReply,
    Slice,
    chain_messages,
    fetch_ranges,
    parse_chain_reply,
)
from ctxstore.core.chats import chat_context, keys_for, scope_args, touch_indexes, with_touch
from ctxstore.core.codec import encode, plain_dict
from ctxstore.core.ids import check_name, new_request_id, new_tags
from ctxstore.core.jobs import CompactionTrigger, enqueue_compaction
from ctxstore.core.keys import ChatKeys
from ctxstore.core.protocol import Arg, Operation, script_call
from ctxstore.core.records import branch_info, corrupt, field_text, text
from ctxstore.core.scripts import load_script
from ctxstore.core.state import StoreState
from ctxstore.core.summaries import parse_summary_member
from ctxstore.core.token_entries import token_entries
from ctxstore.errors import ValidationError
from ctxstore.results import (
    AppendResult,
    BranchChain,
    ChainSize,
    ConflictPolicy,
    ExistingPolicy,
    MessageInput,
    NewMessage,
    StoredMessage,
    StoredSummary,
)
from ctxstore.tokens import MessageCounter

if TYPE_CHECKING:
    from ctxstore.models import BranchInfo


def check_payload(payload: object, where: str) -> dict[str, Any]:
    """A message: a mapping with string keys that is a chat message (a non-empty string
    ``role``) or a role-less item of OpenAI's Responses API (a non-empty string ``type``:
    ``function_call``, ``function_call_output``, ``reasoning``, ...)."""
    if type(payload) is not dict and not isinstance(payload, Mapping):
        raise ValidationError(
            f"{where} must be a chat-message mapping, got {type(payload).__name__}"
        )
    role = payload.get("role")
    if role is None:
        kind = payload.get("type")
        if not isinstance(kind, str) or not kind:
            raise ValidationError(
                f"{where} needs a non-empty string 'role' (a chat message) or, without a role, "
                f"a non-empty string 'type' (an item such as function_call), got neither"
            )
    elif not isinstance(role, str) or not role:
        raise ValidationError(f"{where} needs a non-empty string 'role', got {role!r}")
    for key in payload:
        if not isinstance(key, str):
            raise ValidationError(f"{where} has a non-string key {key!r}")
    return plain_dict(payload)


def own_id(item: object, where: str) -> tuple[object, str]:
    """A plain dict's payload and chosen message id. A chat message's string ``"id"`` (a
    message from a chat UI) names the message, so appending it again is recognized
    (``MessageExistsError``, or an edit with ``on_existing="fork"``), and leaves the stored
    dict: Chat Completions refuses unknown message keys. An item with a ``"type"`` (a Responses
    item) is stored exactly as given under a generated id: that API wants its ids back, and
    agent frameworks repeat them (the Agents SDK's ``"__fake_id__"``). ``NewMessage`` stores
    any dict as given, under a generated or chosen id."""
    if not isinstance(item, Mapping) or "id" not in item or "type" in item:
        return item, ""
    chosen = item["id"]
    if not isinstance(chosen, str):
        raise ValidationError(
            f"{where} has an 'id' of type {type(chosen).__name__}; a message id is a string "
            "(or pass NewMessage(message) to store the dict as it is under a generated id)"
        )
    check_name(chosen, f"{where} id")
    return {key: value for key, value in item.items() if key != "id"}, chosen


def check_metadata(metadata: object, where: str) -> dict[str, Any]:
    """A message's metadata: a mapping with string keys (encoded like the payload)."""
    if not isinstance(metadata, Mapping):
        raise ValidationError(f"{where} metadata must be a mapping, got {type(metadata).__name__}")
    for key in metadata:
        if not isinstance(key, str):
            raise ValidationError(f"{where} metadata has a non-string key {key!r}")
    return plain_dict(metadata)


def check_policy(value: object, allowed: tuple[str, ...], what: str) -> str:
    if value not in allowed:
        raise ValidationError(f"{what} must be one of {allowed}, got {value!r}")
    return str(value)


#: A record's start as the client writes it: a 5-element array whose parent is -2, "the
#: position before mine" (the script rewrites it where the parent is elsewhere).
_RECORD_HEAD = b"\x95\xfe"
#: The same for a record with metadata (6 elements: the metadata comes before the chosen id).
_RECORD_WITH_METADATA_HEAD = b"\x96\xfe"
_NIL = b"\xc0"


def append_args(
    state: StoreState,
    messages: Iterable[MessageInput],
    *,
    now: int,
    count_tokens: MessageCounter | None = None,
    base: int = 0,
) -> tuple[list[str], list[str], list[bytes], bytes]:
    """The chosen ids ("" for each generated one), the tags, the records and the token entries
    (counted with ``count_tokens``, else the store's counter); everything is validated and
    encoded before anything is sent.

    The client builds each record whole, ``[-2, created_at, payload, chosen id or nil, tag]``,
    so the script touches only the few whose parent is not the position before them.
    """
    items = list(messages)
    if not items:
        raise ValidationError("append needs at least one message")
    if len(items) > state.limits.max_batch:
        raise ValidationError(
            f"append takes at most {state.limits.max_batch} messages at once, got {len(items)}"
        )
    created = msgpack.packb(now)
    limit = state.limits.max_message_bytes
    chosen_ids: list[str] = []
    records: list[bytes] = []
    tags = new_tags(len(items))
    seen: set[str] = set()
    payloads: list[dict[str, Any]] = []
    for index, item in enumerate(items):
        where = f"messages[{index}]"
        metadata = b""
        if isinstance(item, NewMessage):
            payload: object = item.message
            chosen = "" if item.id is None else check_name(item.id, f"{where} id")
            if item.metadata:
                metadata = encode(
                    check_metadata(item.metadata, where), what=f"{where} metadata", limit=limit
                )
        else:
            payload, chosen = own_id(item, where)
        if chosen:
            if chosen in seen:
                raise ValidationError(f"{where} repeats message id {chosen!r}")
            seen.add(chosen)
        chosen_ids.append(chosen)
        checked = check_payload(payload, where)
        payloads.append(checked)
        body = encode(checked, what=where, limit=limit)
        chosen_part = msgpack.packb(chosen) if chosen else _NIL
        head = _RECORD_WITH_METADATA_HEAD if metadata else _RECORD_HEAD
        records.append(
            b"".join((head, created, body, metadata, chosen_part, msgpack.packb(tags[index])))
        )
    entries = token_entries(payloads, count_tokens or state.message_tokens, base)
    return chosen_ids, tags, records, entries


def append(
    state: StoreState,
    chat_id: str,
    branch: str | None,
    messages: Iterable[MessageInput],
    *,
    expected_head: str | None,
    on_conflict: ConflictPolicy = "raise",
    on_existing: ExistingPolicy = "raise",
    user_id: str | None = None,
    incarnation: str | None = None,
    count_tokens: MessageCounter | None = None,
    compaction: CompactionTrigger | None = None,
) -> Operation[AppendResult]:
    """Append in order and move the head, in one script; see ``lua/append.lua`` for the policies.
    ``branch`` None writes to the branch that is active when the script runs.

    ``user_id`` refuses another owner's chat and ``incarnation`` a chat re-created since the
    caller knew it (both inside the script). The request id makes a resent call (after a lost
    reply) answer like the first time instead of writing twice. ``compaction``: when the append
    takes the branch's context to its threshold, the script sets the chat's job marker (once)
    and, on a single server, adds the job to its stream; elsewhere the job follows the reply.
    """
    chat = state.keyspace.chat(chat_id)
    if branch is not None:
        check_name(branch, "branch")
    if expected_head is not None:
        check_name(expected_head, "expected_head")
    check_policy(on_conflict, _CONFLICT_POLICIES, "on_conflict")
    check_policy(on_existing, _EXISTING_POLICIES, "on_existing")
    now = state.clock()
    base = 0 if expected_head is None else state.head_sizes.get(chat_id, expected_head)
    chosen_ids, tags, records, entries = append_args(
        state, messages, now=now, count_tokens=count_tokens, base=base
    )
    script = load_script("append")
    owner = user_id if user_id is not None else state.owners.get(chat_id)
    keys = keys_for(script, chat)
    in_script_index = owner is not None and not state.cluster
    if in_script_index:
        keys = (
            *keys,
            *state.keyspace.indexes_of(owner or ""),
            state.keyspace.job_stream(chat_id),
        )
    fields = (
        *scope_args(user_id, incarnation),
        branch or "",
        expected_head or "",
        on_conflict,
        on_existing,
        str(now),
        new_request_id(),
        chat_id if in_script_index else "",
        (owner or "") if in_script_index else "",
        str(compaction.soft_tokens) if compaction is not None else "",
        str(compaction.job_ttl_ms) if compaction is not None else "",
        str(compaction.min_recent_messages) if compaction is not None else "",
        str(base),
    )
    call = script_call(
        script,
        keys,
        ("\t".join(fields), "\t".join(chosen_ids), entries, *records),
        parse=lambda reply: _parse_append(reply, chosen_ids, tags),
        context=chat_context(chat_id),
        writes=True,
    )
    if in_script_index:
        result, stored_owner, indexed, enqueued, head_tokens = yield call
        state.owners.remember(chat_id, stored_owner)
        if not indexed:
            yield from touch_indexes(state, chat_id, stored_owner, result.updated_at)
    else:
        result, _owner, _indexed, enqueued, head_tokens = yield from with_touch(
            state,
            chat_id,
            call,
            now,
            owner_of=lambda reply: reply[1],
            updated_at_of=lambda reply: reply[0].updated_at,
        )
    state.head_sizes.remember(chat_id, result.head_message_id, head_tokens)
    if compaction is not None and result.compaction_job is not None and not enqueued:
        yield from enqueue_compaction(
            state, chat_id, result.branch, result.compaction_job, compaction
        )
    appended: AppendResult = result
    return appended


_CONFLICT_POLICIES = get_args(ConflictPolicy)
_EXISTING_POLICIES = get_args(ExistingPolicy)


def _parse_append(
    reply: Sequence[Any], chosen_ids: Sequence[str], tags: Sequence[str]
) -> tuple[AppendResult, str, bool, bool, int]:
    """The result, from the first position the script used and the messages that were edits:
    a message keeps its chosen id unless it was an edit, else gets ``<pos>.<inc>.<tag>``."""
    (
        target,
        first,
        edits,
        rebased,
        conflict_fork,
        created,
        updated_at,
        owner,
        indexed,
        inc,
        context_tokens,
        job,
        enqueued,
        head_tokens,
    ) = reply
    first, inc = int(first), text(inc)
    edited = {int(index) - 1 for index in edits}
    stored = tuple(
        chosen if chosen and index not in edited else f"{first + index}.{inc}.{tags[index]}"
        for index, chosen in enumerate(chosen_ids)
    )
    result = AppendResult(
        branch=text(target),
        head_message_id=stored[-1],
        message_ids=stored,
        rebased=bool(rebased),
        conflict_fork=text(conflict_fork) or None,
        created_branches=tuple(text(b) for b in created),
        updated_at=int(updated_at),
        context_tokens=int(context_tokens),
        compaction_job=text(job) or None,
    )
    return result, text(owner), bool(indexed), bool(enqueued), int(head_tokens)


def get_message(
    state: StoreState,
    chat_id: str,
    message_id: str,
    *,
    user_id: str | None = None,
    incarnation: str | None = None,
) -> Operation[StoredMessage]:
    chat = state.keyspace.chat(chat_id)
    check_name(message_id, "message_id")
    script = load_script("get_message")
    key = chat.key("log")

    def parse(reply: Sequence[Any]) -> StoredMessage:
        position, record, parent_position, parent_record, inc = reply
        inc = text(inc)
        parent_id = None
        if int(parent_position) >= 0:
            parent = Slice(int(parent_position), int(parent_position), [parent_record])
            parent_id = chain_messages([parent], inc, key, None)[0][0]["id"]
        own = Slice(int(position), int(position), [record])
        return chain_messages([own], inc, key, parent_id)[0][0]

    message: StoredMessage = yield script_call(
        script,
        keys_for(script, chat),
        (*scope_args(user_id, incarnation), message_id),
        parse=parse,
        context=chat_context(chat_id),
    )
    return message


def max_depth_arg(state: StoreState, max_depth: int | None) -> int:
    if max_depth is None:
        return state.limits.max_chain_depth
    if isinstance(max_depth, bool) or not isinstance(max_depth, int) or max_depth < 1:
        raise ValidationError(f"max_depth must be a positive integer, got {max_depth!r}")
    return max_depth


def known_args(cached: CachedChain | None) -> tuple[int, str, str]:
    """What a read tells the script the caller holds: a position, its incarnation and the tag
    of its record."""
    if cached is None:
        return -1, "", ""
    return cached.head, cached.incarnation, cached.head_tag


def assemble_chain(
    state: StoreState,
    chat: ChatKeys,
    cache_key: str,
    cached: CachedChain | None,
    incarnation: str,
    reply: ChainReply,
) -> Operation[CachedChain]:
    """The whole chain of a read reply: the cached prefix it builds on, the chunks still to read,
    and the records it carried; kept in the cache for the next read."""
    base = cached if reply.base >= 0 and cached is not None and cached.head == reply.base else None
    if reply.next >= 0:
        reply = yield from walk_on(state, chat, incarnation, cached, reply)
    parts = reply.parts
    if reply.left:
        parts = yield from fetch_ranges(
            state, chat, incarnation, reply.left, chat_context(chat.chat_id)
        )
    key = chat.key("log")
    parent_id = base.shared_messages[base.length - 1]["id"] if base is not None else None
    added, added_payloads, head_tag = chain_messages(parts, incarnation, key, parent_id)
    if not added and base is not None:
        head_tag = base.head_tag
    length = (base.length if base is not None else 0) + len(added)
    if length != reply.length:
        raise corrupt(
            key,
            str(reply.head),
            f"the chain ending at position {reply.head} should hold {reply.length} messages, "
            f"its runs give {length}",
        )
    size = estimated_size(sum(len(record) for part in parts for record in part.records), len(added))
    if base is None:
        messages, payloads = added, added_payloads
    else:
        messages, payloads = state.cache.extend(base, added, added_payloads)
        size += base.size
    chain = CachedChain(incarnation, reply.head, head_tag, length, messages, payloads, size)
    if reply.head >= 0:
        state.cache.store(chat.chat_id, cache_key, chain)
    return chain


def walk_on(
    state: StoreState,
    chat: ChatKeys,
    incarnation: str,
    cached: CachedChain | None,
    reply: ChainReply,
    wanted: int | None = None,
) -> Operation[ChainReply]:
    """Finish a walk the script stopped at its run budget (a chain of very many short runs),
    one bounded call at a time; the records are all left to :func:`fetch_ranges`. ``wanted``:
    how many messages a window read wants in all (None: the whole chain)."""
    script = load_script("get_chain")
    left, base, next_position = list(reply.left), reply.base, reply.next
    remaining = None if wanted is None else wanted - _ranges_size(left, reply.parts)
    while next_position >= 0:
        more: ChainReply = yield script_call(
            script,
            keys_for(script, chat),
            (
                "",
                incarnation,
                "walk",
                next_position,
                *read_args(state, None, cached),
                *Window(max_messages=remaining).args(),
            ),
            parse=lambda raw: _parse_read(raw, chat.key("chat"))[4],
            context=chat_context(chat.chat_id),
        )
        left = more.left + left  # older ranges come first
        if remaining is not None:
            remaining -= _ranges_size(more.left, [])
        base, next_position = more.base, more.next
    return replace(reply, base=base, parts=[], left=left, next=-1)


def _ranges_size(flat: Sequence[int], parts: Sequence[Slice]) -> int:
    ranges = sum(flat[i + 1] - flat[i] + 1 for i in range(0, len(flat), 2))
    return ranges + sum(part.last - part.first + 1 for part in parts)


def read_args(
    state: StoreState, max_depth: int | None, cached: CachedChain | None
) -> tuple[Arg, ...]:
    known, known_inc, known_tag = known_args(cached)
    return (
        max_depth_arg(state, max_depth),
        known,
        known_inc,
        state.limits.read_inline_messages,
        known_tag,
    )


@dataclass(frozen=True)
class Window:
    """What part of a chain a read returns (``lua/get_chain.lua`` ARGV[10..13]).

    ``max_tokens`` / ``max_messages``: the newest messages within that budget (stored counts),
    never starting with a tool result whose call is cut off; ``newest``: a chain longer than
    ``max_depth`` is cut to its newest ``max_depth`` messages instead of raising;
    ``count_only``: no records, only the chain's size; ``after_summary``: start after the newest
    summary on the chain and return it (``max_tokens`` then counts it too).
    """

    max_tokens: int | None = None
    max_messages: int | None = None
    newest: bool = False
    count_only: bool = False
    after_summary: bool = False

    def __post_init__(self) -> None:
        for name in ("max_tokens", "max_messages"):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 0
            ):
                raise ValidationError(f"{name} must be a non-negative integer, got {value!r}")

    @property
    def cuts(self) -> bool:
        """Whether the read returns less than the whole chain whatever is stored (it then
        skips the cache). A read after the summary does only when the chain has one."""
        return (
            self.max_tokens is not None
            or self.max_messages is not None
            or self.newest
            or self.count_only
        )

    def args(self) -> tuple[Arg, ...]:
        return (
            "" if self.max_tokens is None else self.max_tokens,
            "" if self.max_messages is None else self.max_messages,
            "1" if self.newest else "",
            "1" if self.count_only else "",
            "1" if self.after_summary else "",
        )


WHOLE_CHAIN = Window()


def _read_chain(
    state: StoreState,
    chat_id: str,
    mode: str,
    start: str | None,
    max_depth: int | None,
    user_id: str | None,
    incarnation: str | None,
    window: Window = WHOLE_CHAIN,
) -> Operation[tuple[str, Any, str, CachedChain, ChainReply]]:
    """One chain read (``mode`` "head" or "branch", see ``lua/get_chain.lua``): (branch name,
    raw branch record, active branch, the chain, the reply's sizes). A whole chain goes through
    the process cache; a window, or the part after a summary, is read as it is, not cached."""
    chat = state.keyspace.chat(chat_id)
    if start is not None:
        check_name(start, mode)
    script = load_script("get_chain")
    cache_key = f"{mode}:{start or ''}"
    cached = None if window.cuts else state.cache.lookup(chat_id, cache_key)
    name, raw_branch, active, inc, reply = yield script_call(
        script,
        keys_for(script, chat),
        (
            *scope_args(user_id, incarnation),
            mode,
            start or "",
            *read_args(state, max_depth, cached),
            *window.args(),
        ),
        parse=lambda raw: _parse_read(raw, chat.key("chat")),
        context=chat_context(chat_id),
    )
    if window.cuts or reply.summary_position >= 0:
        chain = yield from assemble_window(state, chat, inc, reply)
    else:
        chain = yield from assemble_chain(state, chat, cache_key, cached, inc, reply)
    return name, raw_branch, active, chain, reply


def assemble_window(
    state: StoreState, chat: ChatKeys, incarnation: str, reply: ChainReply
) -> Operation[CachedChain]:
    """The newest ``reply.kept`` messages of a window read (not cached). The script sent one
    more record when the window does not start at the root: the first kept message's parent,
    read for its id and dropped here."""
    kept = reply.kept
    read = kept + 1 if 0 < kept < reply.length else kept
    if reply.next >= 0:
        reply = yield from walk_on(state, chat, incarnation, None, reply, wanted=read)
    parts = reply.parts
    if reply.left:
        parts = yield from fetch_ranges(
            state, chat, incarnation, reply.left, chat_context(chat.chat_id)
        )
    key = chat.key("log")
    messages, payloads, head_tag = chain_messages(parts, incarnation, key, None)
    if len(messages) != read:
        raise corrupt(
            key,
            str(reply.head),
            f"a window of {kept} messages ending at position {reply.head} read {len(messages)}",
        )
    messages, payloads = messages[read - kept :], payloads[read - kept :]
    size = estimated_size(sum(len(record) for part in parts for record in part.records), read)
    return CachedChain(incarnation, reply.head, head_tag, kept, messages, payloads, size)


def get_chain(
    state: StoreState,
    chat_id: str,
    head: str | None,
    *,
    max_depth: int | None = None,
    newest: bool = False,
    user_id: str | None = None,
    incarnation: str | None = None,
) -> Operation[list[StoredMessage]]:
    """The chain ending at ``head``, root first (empty for ``head=None``): one round trip, or one
    per chunk of a very long chain. ``newest=True`` returns the newest ``max_depth`` messages of
    a longer chain instead of raising :class:`~ctxstore.errors.LimitExceededError`."""
    window = Window(newest=True) if newest else WHOLE_CHAIN
    _name, _raw, _active, chain, _reply = yield from _read_chain(
        state, chat_id, "head", head, max_depth, user_id, incarnation, window
    )
    return chain.messages()


def _parse_read(reply: Sequence[Any], chat_key: str) -> tuple[str, Any, str, str, ChainReply]:
    """The reply of get_chain.lua. The branch name is the caller's or the chat's active one,
    and the active branch and incarnation come from the chat hash."""
    name, raw_branch, active, inc, *chain = reply
    return (
        field_text(name, chat_key, "active_branch"),
        raw_branch,
        field_text(active, chat_key, "active_branch"),
        field_text(inc, chat_key, "inc"),
        parse_chain_reply(chain),
    )


def read_branch(
    state: StoreState,
    chat_id: str,
    branch: str | None = None,
    *,
    max_depth: int | None = None,
    window: Window = WHOLE_CHAIN,
    user_id: str | None = None,
    incarnation: str | None = None,
) -> Operation[tuple[BranchInfo, CachedChain, ChainReply]]:
    """A branch (the active one for None), its chain (shared lists: do not change them) and the
    reply's sizes, read in one script; what the process cache holds is not read again."""
    name, raw_branch, active, chain, reply = yield from _read_chain(
        state, chat_id, "branch", branch, max_depth, user_id, incarnation, window
    )
    branch_key = state.keyspace.chat(chat_id).key("branch")
    info, _seq = branch_info(name, raw_branch, active=active, key=branch_key)
    check_head(branch_key, info, chain)
    if reply.tokens >= 0 and info.head_message_id is not None:
        state.head_sizes.remember(chat_id, info.head_message_id, reply.tokens)
    return info, chain, reply


def check_head(branch_key: str, info: BranchInfo, chain: CachedChain) -> None:
    """A branch's chain ends at the message its record names. The script checked that the
    head's position is in the log; a record there with another id (another tag, another
    message) means the branch record is corrupt. A read that returns no message (a size, a
    chain wholly summarized) is checked by the script instead."""
    if chain.length == 0:
        return
    found = chain.shared_messages[chain.length - 1]["id"]
    if found != info.head_message_id:
        raise corrupt(
            branch_key,
            info.name,
            f"names message {info.head_message_id!r} as its head, the message at its position "
            f"is {found!r}",
        )


def load_branch(
    state: StoreState,
    chat_id: str,
    branch: str | None = None,
    *,
    max_depth: int | None = None,
    max_tokens: int | None = None,
    max_messages: int | None = None,
    after_summary: bool = False,
    user_id: str | None = None,
    incarnation: str | None = None,
) -> Operation[BranchChain]:
    """A branch (the active one for None) and its chain, or with ``max_tokens`` /
    ``max_messages`` the newest part of it that fits, or with ``after_summary`` the newest
    summary on it and the messages after that (see :class:`Window`), in one script."""
    window = Window(max_tokens=max_tokens, max_messages=max_messages, after_summary=after_summary)
    info, chain, reply = yield from read_branch(
        state,
        chat_id,
        branch,
        max_depth=max_depth,
        window=window,
        user_id=user_id,
        incarnation=incarnation,
    )
    summary = branch_summary(state, chat_id, reply)
    tokens = reply.kept_tokens + (summary["tokens"] if summary is not None else 0)
    return BranchChain(
        info, chain.messages(), tokens, reply.tokens, reply.length, summary, reply.context_tokens
    )


def branch_summary(state: StoreState, chat_id: str, reply: ChainReply) -> StoredSummary | None:
    """The summary a read returned, decoded (None: none asked for, or none on the chain)."""
    if reply.summary is None:
        return None
    return parse_summary_member(
        reply.summary, state.keyspace.chat(chat_id).key("summary"), reply.summary_position
    )


def branch_size(
    state: StoreState,
    chat_id: str,
    branch: str | None = None,
    *,
    user_id: str | None = None,
    incarnation: str | None = None,
) -> Operation[ChainSize]:
    """How many messages and stored tokens a branch's chain holds, and the tokens of its newest
    summary plus the messages after it (what a summarized read sends): one script, no payload."""
    _info, _chain, reply = yield from read_branch(
        state,
        chat_id,
        branch,
        window=Window(count_only=True, after_summary=True),
        user_id=user_id,
        incarnation=incarnation,
    )
    summary = branch_summary(state, chat_id, reply)
    return ChainSize(
        reply.length,
        reply.tokens,
        reply.context_tokens,
        summary["message_id"] if summary is not None else None,
    )
