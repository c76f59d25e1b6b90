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
from ctxstore._core.format.sealed import ChatSeal, ResealNeededError
from ctxstore._core.format.versions import FORMAT, SEALED_FORMAT
from ctxstore._core.ids import new_incarnation
from ctxstore._core.keyring import OwnerKeys
from ctxstore._core.ops import owner_records
from ctxstore._core.ops.chats import (
    chat_context,
    keys_for,
    metadata_args,
    metadata_limit_args,
    sealed_metadata_args,
    touch_indexes,
)
from ctxstore._core.ops.data_keys import opened_chat, owner_keys
from ctxstore._core.ops.reads import (
    assemble_chain,
    check_head,
    generation_of,
    parse_chain_reply,
    read_args,
)
from ctxstore._core.ops.retention import ttl_arg
from ctxstore._core.protocol import Arg, Call, Operation, script_call
from ctxstore._core.scripts import load_script
from ctxstore._core.state import StoreState
from ctxstore.crypto.aead import random_key
from ctxstore.crypto.seal import SealingKey
from ctxstore.errors import ConflictError
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
    sealing = MetadataSealing(state, chat_id, user_id, meta_args, incarnation)
    if sealing.needed:
        yield from sealing.start()

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
                sealing.field,
                *sealing.args,
            ),
            parse=lambda reply: _parse(chat.key("chat"), chat.key("branch"), reply),
            context=chat_context(chat_id),
            # Whether it creates is known from the reply only: the wait is sent every time, and
            # judged when the chat was created or metadata merged.
            writes=lambda parsed: (
                parsed is not None and bool(parsed[0] or meta_args or explicit_ttl)
            ),
        )

    for _attempt in range(MAX_RESEALS):
        try:
            opened_reply = yield call(False)
            if opened_reply is None:  # a Cluster's new chat: its owner record names it first
                opened_reply = yield from owner_records.created_after_record(
                    state, user_id, chat_id, incarnation, call(True)
                )
            break
        except ResealNeededError as moved:
            yield from sealing.again(moved.layout)
    else:
        raise ConflictError(
            f"chat {chat_id!r} kept being created again while its metadata was sealed for it",
            chat_id=chat_id,
            reason="reseal",
        )
    created, flat, info, chain_reply, forked = opened_reply
    if created and state.settings.encryption is not None:
        # A sealed chat's owner has a data key before its first append (made only now: an
        # open that is refused makes none).
        yield from owner_keys(state, user_id, create=True)
    meta = yield from opened_chat(state, chat_id, chat.key("chat"), flat, chat_meta)
    state.owners.remember(chat_id, meta.user_id)
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


def _parse(chat_key: str, branch_key: str, reply: Sequence[Any]) -> Any:
    """The script's reply, the chat hash left for :func:`opened_chat` (a sealed chat's values
    open with its owner's keys)."""
    if len(reply) == 1:
        return None  # {-1}: to be recorded in its owner record before it is created
    created, flat, active, raw_branch, forked, *chain = reply
    active = field_text(active, chat_key, "active_branch")
    info, _seq = branch_info(active, raw_branch, active=active, key=branch_key)
    chain_reply = None
    if chain:
        generation = generation_of(pairs(flat, chat_key).get("rgen"))
        chain_reply = replace(parse_chain_reply(chain), forked=bool(forked), generation=generation)
    return bool(created), flat, info, chain_reply, bool(forked)


#: How many times an open seals its metadata again for the chat's incarnation (each time the
#: chat was created again between the script's answer and the next call).
MAX_RESEALS = 8
#: The ``seal`` field of an open whose owner has no data key yet (``lua/open_chat.lua``): never
#: an incarnation, so the script answers the right one and writes nothing.
PROBE = "?"


class MetadataSealing:
    """The metadata an open merges, as it is sent: in the clear without encryption; else each
    value sealed for the chat's incarnation, which the script checks (``seal``: RESEAL with
    the right one, before any write). The first call predicts it: the one this process last
    saw, else the one the call would create. An owner without a data key is asked with values
    sealed under a throwaway key (``PROBE``): the key is made only for an open that takes
    them, so a refused open leaves nothing behind."""

    def __init__(
        self, state: StoreState, chat_id: str, user_id: str, args: list[Arg], new_inc: str
    ) -> None:
        self.state, self.chat_id, self.user_id, self.plain = state, chat_id, user_id, args
        self.needed = state.settings.encryption is not None and bool(args)
        self.new_inc = new_inc
        self.field = ""
        self.args = args
        self.keys: OwnerKeys | None = None

    def start(self) -> Operation[None]:
        self.keys = yield from owner_keys(self.state, self.user_id)
        place = self.state.caches.places.get(self.chat_id)
        self._seal(place.incarnation if place is not None else self.new_inc)

    def again(self, incarnation: str) -> Operation[None]:
        """Seal for the incarnation the script named (making the owner's key after a probe)."""
        if self.keys is None or self.keys.current is None:
            self.keys = yield from owner_keys(self.state, self.user_id, create=True)
        self._seal(incarnation)

    def _seal(self, incarnation: str) -> None:
        keys = self.keys
        assert keys is not None, "start() reads the owner's keys first"
        if keys.current is None:
            keys = OwnerKeys(keys.user_id, keys.subject, SealingKey("probe", random_key()), {})
            incarnation = PROBE
        seal = ChatSeal(keys, self.state.keyspace.namespace, self.chat_id, incarnation)
        self.field = incarnation
        self.args = sealed_metadata_args(seal, self.plain)


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
