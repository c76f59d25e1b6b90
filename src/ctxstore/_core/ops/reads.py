"""Reads: one message, a chain, a branch with its chain or a window of it, a branch's size.

A read is one ``get_chain.lua`` call: the script walks the chain's runs back from its head (or
from the newest summary on, for a read ``after_summary``) and returns it as *ranges* of log
positions, with the records themselves when there are few. It is told which chain the process
cache (:mod:`ctxstore._core.cache`) already holds and returns only what follows it. A long
chain's records are read with plain ``LRANGE`` commands of bounded size, pipelined in one more
round trip (:func:`fetch_ranges`): records never change, so reading them after the script is as
consistent as reading them in it, no single command holds Redis for long, and Redis spends a
tenth of the time it spends passing each record through Lua. A window (the newest messages
within a token or message budget, never starting inside a tool group) is chosen in the script
from the stored token entries, with no payload read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ctxstore._base.ids import check_name
from ctxstore._core.cache import CachedChain, estimated_size
from ctxstore._core.format.fields import corrupt, field_text, text
from ctxstore._core.format.pointers import branch_info
from ctxstore._core.format.records import Slice, chain_messages, record_id
from ctxstore._core.format.sealed import ChatSeal
from ctxstore._core.format.summaries import parse_summary_member
from ctxstore._core.keys import ChatKeys
from ctxstore._core.ops.chats import chat_context, keys_for, scope_args
from ctxstore._core.ops.data_keys import opened
from ctxstore._core.ops.versions import chain_versions_call
from ctxstore._core.protocol import Arg, Call, Operation, command_call, script_call
from ctxstore._core.scripts import load_script
from ctxstore._core.state import StoreState
from ctxstore.errors import ChatReplacedError, CtxStoreError, ValidationError
from ctxstore.models import BranchChain, ChainSize, StoredMessage, StoredSummary
from ctxstore.ui.parts import first_ui_message

if TYPE_CHECKING:
    from ctxstore.models import BranchInfo


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

    def decode(reply: Sequence[Any], seal: ChatSeal | None) -> StoredMessage:
        position, record, parent_position, parent_record, inc = reply
        parent_id = None
        if int(parent_position) >= 0:
            parent_id = record_id(parent_record, inc, key, int(parent_position))
        own = Slice(int(position), int(position), [record])
        return chain_messages([own], inc, key, parent_id, seal=seal)[0][0]

    reply: list[Any] = yield script_call(
        script,
        keys_for(script, chat),
        (*scope_args(user_id, incarnation), message_id),
        parse=lambda raw: [*raw[:4], text(raw[4])],
        context=chat_context(chat_id),
    )
    message: StoredMessage = yield from opened(
        state, chat_id, user_id, reply[4], lambda seal: decode(reply, seal)
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
    return cached.head, cached.incarnation + cached.generation, cached.head_tag


def split_cache_id(raw: str) -> tuple[str, str]:
    """(incarnation, generation) of what a read reply says its chain was read from: the
    incarnation names the messages; the generation (``"~<rgen>"``, or "") tells a copy read
    before a redaction from one read after."""
    incarnation, mark, rgen = raw.partition("~")
    return incarnation, mark + rgen


def generation_of(rgen: Any) -> str:
    """The generation a chat hash's ``rgen`` field stands for ("" for none)."""
    if rgen is None:
        return ""
    shown = rgen.decode() if isinstance(rgen, bytes) else str(rgen)
    return "" if shown in ("", "0") else f"~{shown}"


def assemble_chain(
    state: StoreState,
    chat: ChatKeys,
    cache_key: str,
    cached: CachedChain | None,
    incarnation: str,
    reply: ChainReply,
    owner: str | None = None,
) -> Operation[CachedChain]:
    """The whole chain of a read reply: the cached prefix it builds on, the chunks still to read,
    and the records it carried (opened with the keys of ``owner``, the caller, when sealed);
    kept in the cache for the next read."""
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
    added, added_payloads, head_tag = yield from opened(
        state,
        chat.chat_id,
        owner,
        incarnation,
        lambda seal: chain_messages(
            parts, incarnation, key, parent_id, pause_gc=state.settings.pause_gc, seal=seal
        ),
    )
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
    if base is not None and base.first_ui >= 0:
        first_ui = base.first_ui
    else:
        first_ui = first_ui_message(payloads, base.length if base is not None else 0)
    chain = CachedChain(
        incarnation,
        reply.head,
        head_tag,
        length,
        messages,
        payloads,
        size,
        first_ui,
        generation=reply.generation,
    )
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
    versions: bool = False,
) -> Operation[tuple[str, Any, str, CachedChain, ChainReply]]:
    """One chain read (``mode`` "head" or "branch", see ``lua/get_chain.lua``): (branch name,
    raw branch record, active branch, the chain, the reply's sizes). A whole chain goes through
    the process cache; a window, or the part after a summary, is read as it is, not cached.
    ``versions`` (branch mode): the chain's messages that have versions come along, from a
    second script sent in the same round trip (``reply.versions``)."""
    chat = state.keyspace.chat(chat_id)
    if start is not None:
        check_name(start, mode)
    script = load_script("get_chain")
    cache_key = f"{mode}:{start or ''}"
    cached = None if window.cuts else state.cache.lookup(chat_id, cache_key)
    read = script_call(
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
    if versions and mode == "branch":
        results = yield (
            read,
            chain_versions_call(state, chat_id, start, user_id=user_id, incarnation=incarnation),
        )
        for result in results:
            if isinstance(result, CtxStoreError):
                raise result
        (name, raw_branch, active, inc, reply), found = results
        reply = replace(reply, versions=found)
    else:
        name, raw_branch, active, inc, reply = yield read
    if window.cuts or reply.summary_position >= 0:
        chain = yield from assemble_window(state, chat, inc, reply, user_id)
    else:
        chain = yield from assemble_chain(state, chat, cache_key, cached, inc, reply, user_id)
    if reply.summary is not None:
        member, position, key = reply.summary, reply.summary_position, chat.key("summary")
        opened_summary = yield from opened(
            state,
            chat_id,
            user_id,
            inc,
            lambda seal: parse_summary_member(member, key, position, seal),
        )
        reply = replace(reply, opened_summary=opened_summary)
    return name, raw_branch, active, chain, reply


def assemble_window(
    state: StoreState,
    chat: ChatKeys,
    incarnation: str,
    reply: ChainReply,
    owner: str | None = None,
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
    messages, payloads, head_tag = yield from opened(
        state,
        chat.chat_id,
        owner,
        incarnation,
        lambda seal: chain_messages(
            parts, incarnation, key, None, pause_gc=state.settings.pause_gc, seal=seal
        ),
    )
    if len(messages) != read:
        raise corrupt(
            key,
            str(reply.head),
            f"a window of {kept} messages ending at position {reply.head} read {len(messages)}",
        )
    messages, payloads = messages[read - kept :], payloads[read - kept :]
    size = estimated_size(sum(len(record) for part in parts for record in part.records), read)
    return CachedChain(
        incarnation,
        reply.head,
        head_tag,
        kept,
        messages,
        payloads,
        size,
        first_ui_message(payloads),
    )


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
    name, raw_branch, active, read_from, *chain = reply
    inc, generation = split_cache_id(field_text(read_from, chat_key, "inc"))
    parsed = parse_chain_reply(chain)
    return (
        field_text(name, chat_key, "active_branch"),
        raw_branch,
        field_text(active, chat_key, "active_branch"),
        inc,
        replace(parsed, generation=generation) if generation else parsed,
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
    versions: bool = False,
) -> Operation[tuple[BranchInfo, CachedChain, ChainReply]]:
    """A branch (the active one for None), its chain (shared lists: do not change them) and the
    reply's sizes, read in one script; what the process cache holds is not read again.
    ``versions``: the chain's messages that have versions too, in the same round trip."""
    name, raw_branch, active, chain, reply = yield from _read_chain(
        state, chat_id, "branch", branch, max_depth, user_id, incarnation, window, versions
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
    if reply.opened_summary is not None:
        return reply.opened_summary
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


def slices(covered: Sequence[Any], parts: Sequence[Sequence[bytes]]) -> list[Slice]:
    """Pair a reply's flat covered ranges with its LRANGE replies."""
    return [
        Slice(int(covered[2 * i]), int(covered[2 * i + 1]), part) for i, part in enumerate(parts)
    ]


def flat_ranges(reply: Sequence[Any]) -> list[int]:
    return [int(value) for value in reply]


def fetch_ranges(
    state: StoreState,
    chat: ChatKeys,
    incarnation: str,
    ranges: Sequence[int],
    context: dict[str, Any],
) -> Operation[list[Slice]]:
    """The records of ``ranges`` (flat first, last pairs), in one pipelined round trip of plain
    ``LRANGE`` commands of at most ``limits.read_chunk_messages`` records each.

    Redis serves other clients between the commands, so a long read never holds it for long.
    The ``HGET`` of the incarnation comes last: incarnations never repeat, so if the chat was
    deleted or re-created before any of the ``LRANGE`` commands ran, the ``HGET`` sees it.
    """
    log_key, chat_key = chat.key("log"), chat.key("chat")
    chunk = state.limits.read_chunk_messages
    wanted: list[tuple[int, int]] = []
    for i in range(0, len(ranges), 2):
        first, last = ranges[i], ranges[i + 1]
        for start in range(first, last + 1, chunk):
            wanted.append((start, min(start + chunk - 1, last)))
    calls: list[Call[Any]] = [
        command_call(("LRANGE", log_key, first, last), keys=(log_key,)) for first, last in wanted
    ]
    calls.append(command_call(("HGET", chat_key, "inc"), keys=(chat_key,)))
    outcomes = yield tuple(calls)
    for outcome in outcomes:
        if isinstance(outcome, CtxStoreError):
            raise outcome
    if outcomes[-1] is None or outcomes[-1] != incarnation.encode():
        raise ChatReplacedError(
            f"chat {chat.chat_id!r} was deleted or re-created while it was being read",
            **context,
        )
    fetched = []
    for (first, last), records in zip(wanted, outcomes, strict=False):
        if len(records) != last - first + 1:
            raise corrupt(
                log_key, str(last), f"the chain reaches position {last}, past the end of the log"
            )
        fetched.append(Slice(first, last, records))
    return fetched


@dataclass(frozen=True)
class ChainReply:
    """The chain part of a read reply (see ``chain_reply`` in ``lua/lib/reads.lua``)."""

    head: int
    length: int
    base: int
    parts: list[Slice]
    left: list[int]
    #: Where the walk must go on (another call), -1 when it is complete.
    next: int
    #: The chain's tokens (-1: not asked, as when a chat is opened).
    tokens: int = -1
    #: How many of the newest messages the read returns (the chain length unless a window).
    kept: int = -1
    #: The tokens of those messages.
    kept_tokens: int = -1
    #: The newest summary on the chain when the read asked for it (-1, None: none).
    summary_position: int = -1
    summary: bytes | None = None
    #: The tokens of that summary and every message after it (the chain's, without one).
    context_tokens: int = -1
    #: The chain's messages that have versions, when the read asked (see ``ops.versions``).
    versions: dict[str, tuple[int, int]] | None = None
    #: Whether the chat may have forks (more than one run): without, no message has versions.
    forked: bool = True
    #: ``"~<rgen>"`` once the chat had a message redacted, else "": what a cached chain records
    #: beside its incarnation (see ``cache_id`` in ``lua/lib/reads.lua``).
    generation: str = ""
    #: ``summary`` decoded (and opened, a sealed chat's) by the read that returned it.
    opened_summary: StoredSummary | None = None


def parse_chain_reply(reply: Sequence[Any]) -> ChainReply:
    head, length, base, covered, parts, left, next_position, *sizes = reply
    tokens, kept, kept_tokens = (int(value) for value in sizes[:3]) if sizes else (-1, -1, -1)
    summary_position, summary, context_tokens = -1, None, tokens
    forked = True
    if len(sizes) > 3:
        summary_position, context_tokens = int(sizes[3]), int(sizes[5])
        summary = sizes[4] if summary_position >= 0 else None
    if len(sizes) > 6:
        forked = bool(int(sizes[6]))
    return ChainReply(
        int(head),
        int(length),
        int(base),
        slices(covered, parts),
        flat_ranges(left),
        int(next_position),
        tokens,
        kept,
        kept_tokens,
        summary_position,
        summary,
        context_tokens,
        forked=forked,
    )
