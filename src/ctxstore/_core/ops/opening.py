"""Opening a chat as its owner: create-or-check, merge metadata, optionally read the branch."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ctxstore._base.ids import check_key_id
from ctxstore._core.cache import CachedChain
from ctxstore._core.format.chat import chat_meta
from ctxstore._core.format.fields import field_text, pairs
from ctxstore._core.format.pointers import branch_info
from ctxstore._core.format.versions import FORMAT, SEALED_FORMAT
from ctxstore._core.ids import new_incarnation
from ctxstore._core.ops import owner_records
from ctxstore._core.ops.chats import (
    chat_context,
    keys_for,
    metadata_args,
    metadata_limit_args,
    touch_indexes,
)
from ctxstore._core.ops.data_keys import owner_keys
from ctxstore._core.ops.reads import (
    assemble_chain,
    check_head,
    generation_of,
    parse_chain_reply,
    read_args,
)
from ctxstore._core.ops.retention import ttl_arg
from ctxstore._core.protocol import Call, Operation, script_call
from ctxstore._core.scripts import load_script
from ctxstore._core.state import StoreState
from ctxstore.models import OpenedChat
from ctxstore.settings import STORE_DEFAULT, TTL, StoreDefault, ttl_ms

if TYPE_CHECKING:
    from ctxstore.models import ChatMeta

#: What the engine's first read of the active branch is cached under (as a branch read of "").
ACTIVE_BRANCH_KEY = "branch:"


def open_chat_op(
    state: StoreState,
    chat_id: str,
    user_id: str,
    metadata: Mapping[str, Any] | None = None,
    *,
    load: bool = False,
    max_depth: int | None = None,
    unless_summarized: bool = False,
    ttl: TTL | StoreDefault = STORE_DEFAULT,
) -> Operation[tuple[OpenedChat, CachedChain | None, bool]]:
    """Create the chat if missing, else check the owner; merge metadata; read the active branch.

    One script: opening an existing chat is one round trip, with its conversation when
    ``load``. Creating one (or merging metadata) adds a round trip for the index entries,
    sent only after the script succeeded, so a refused open writes nothing anywhere. Returns the
    opened chat and, with ``load``, the chain as cached (shared lists); with
    ``unless_summarized`` as well, no chain (None) when the chat has summaries, for a reader
    that starts after the newest one. ``ttl``: the retention of a chat this call creates (the
    store's by default); given, it is set on an existing chat too (see
    :mod:`ctxstore._core.ops.retention`). Last, whether the chat may have forks (more than one
    run): without, none of its messages has versions.
    """
    chat = state.keyspace.chat(chat_id)
    check_key_id(user_id, "user_id")
    meta_args = metadata_args(metadata, state)
    explicit_ttl = not isinstance(ttl, StoreDefault)
    retention = ttl_ms(ttl) if not isinstance(ttl, StoreDefault) else state.default_ttl_ms
    script = load_script("open_chat")
    cached = state.cache.lookup(chat_id, ACTIVE_BRANCH_KEY) if load else None
    keys = keys_for(script, chat)
    if not state.cluster:  # the script records a chat it creates in its owner record itself
        keys = (*keys, state.keyspace.owner_record(user_id))

    incarnation = new_incarnation()  # a resend of the call, after its record, keeps it

    def call(recorded: bool) -> Call[Any]:
        return script_call(
            script,
            keys,
            (
                user_id,
                state.clock(),
                incarnation,
                ("2" if unless_summarized else "1") if load else "0",
                *read_args(state, max_depth, cached),
                *metadata_limit_args(state),
                ttl_arg(retention),
                "1" if explicit_ttl else "0",
                chat_id,
                "1" if recorded else "0",
                SEALED_FORMAT if state.settings.encryption is not None else FORMAT,
                *meta_args,
            ),
            parse=lambda reply: _parse(chat_id, chat.key("chat"), chat.key("branch"), reply),
            context=chat_context(chat_id),
            # Whether it creates is known from the reply only: the wait is sent every time, and
            # judged when the chat was created or metadata merged.
            writes=lambda parsed: (
                parsed is not None and bool(parsed[0] or meta_args or explicit_ttl)
            ),
        )

    opened_reply = yield call(False)
    if opened_reply is None:  # a Cluster's new chat: its owner record names it first
        opened_reply = yield from owner_records.created_after_record(
            state, user_id, chat_id, incarnation, call(True)
        )
    created, meta, info, chain_reply, forked = opened_reply
    state.owners.remember(chat_id, meta.user_id)
    if created and state.settings.encryption is not None:
        # A sealed chat's owner has a data key before its first append (made only now: an
        # open that is refused makes none).
        yield from owner_keys(state, user_id, create=True)
    chain = None
    if chain_reply is not None:
        chain = yield from assemble_chain(
            state, chat, ACTIVE_BRANCH_KEY, cached, meta.incarnation, chain_reply, user_id
        )
        check_head(chat.key("branch"), info, chain)
    if created or meta_args:
        yield from touch_indexes(state, chat_id, user_id, meta.updated_at)
    opened = OpenedChat(
        chat=meta,
        created=created,
        branch=info,
        messages=chain.messages() if chain is not None else [],
    )
    return opened, chain, forked


def _parse(chat_id: str, chat_key: str, branch_key: str, reply: Sequence[Any]) -> Any:
    if len(reply) == 1:
        return None  # {-1}: to be recorded in its owner record before it is created
    created, flat, active, raw_branch, forked, *chain = reply
    meta = chat_meta(chat_id, chat_key, flat)
    active = field_text(active, chat_key, "active_branch")
    info, _seq = branch_info(active, raw_branch, active=active, key=branch_key)
    chain_reply = None
    if chain:
        generation = generation_of(pairs(flat, chat_key).get("rgen"))
        chain_reply = replace(parse_chain_reply(chain), forked=bool(forked), generation=generation)
    return bool(created), meta, info, chain_reply, bool(forked)


def open_chat(
    state: StoreState,
    chat_id: str,
    user_id: str,
    metadata: Mapping[str, Any] | None = None,
    *,
    load: bool = False,
    max_depth: int | None = None,
    ttl: TTL | StoreDefault = STORE_DEFAULT,
) -> Operation[OpenedChat]:
    """Create the chat if missing, else check the owner; merge metadata; read the active branch."""
    opened, _chain, _forked = yield from open_chat_op(
        state, chat_id, user_id, metadata, load=load, max_depth=max_depth, ttl=ttl
    )
    return opened


def upsert_chat(
    state: StoreState,
    chat_id: str,
    user_id: str,
    metadata: Mapping[str, Any] | None = None,
    *,
    ttl: TTL | StoreDefault = STORE_DEFAULT,
) -> Operation[ChatMeta]:
    """Create the chat if missing, else check that ``user_id`` owns it; merge ``metadata``;
    ``ttl`` as in :func:`open_chat_op`."""
    opened = yield from open_chat(state, chat_id, user_id, metadata, ttl=ttl)
    meta: ChatMeta = opened.chat
    return meta
