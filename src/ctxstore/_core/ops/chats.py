"""Chat operations: create, read, update, usage, delete."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from ctxstore._base.ids import check_key_id, check_name
from ctxstore._core import telemetry
from ctxstore._core.format.chat import HIDDEN, METADATA_PREFIX, USAGE_KEY, USAGE_PREFIX, chat_meta
from ctxstore._core.format.codec import encode
from ctxstore._core.format.fields import field_count, pairs, text
from ctxstore._core.format.sealed import ChatSeal
from ctxstore._core.ids import new_request_id
from ctxstore._core.keys import ChatKeys
from ctxstore._core.ops import indexes, owner_records
from ctxstore._core.ops.data_keys import opened_chat, write_seal
from ctxstore._core.protocol import Arg, Call, Operation, script_call
from ctxstore._core.scripts import LuaScript, load_script
from ctxstore._core.state import StoreState
from ctxstore.errors import CtxStoreError, LimitExceededError, ValidationError

if TYPE_CHECKING:
    from ctxstore.models import ChatMeta
from ctxstore.messages.usage import normalize_usage

log = logging.getLogger("ctxstore")
T = TypeVar("T")


def chat_context(chat_id: str) -> dict[str, Any]:
    return {"chat_id": chat_id}


def keys_for(script: LuaScript, chat: ChatKeys) -> tuple[str, ...]:
    """The chat keys a script declares in its header, in its order (optional ones left out)."""
    return chat.select(script.key_names[: script.required_keys])


#: The longest chat title, in characters.
MAX_TITLE_CHARS = 1024
_TITLE_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def check_title(title: object) -> str:
    """A chat title: a string of at most MAX_TITLE_CHARS characters, on one line, without
    control characters (it is shown in lists and logs) or lone surrogates."""
    if not isinstance(title, str):
        raise ValidationError(f"title must be a string, got {type(title).__name__}")
    if len(title) > MAX_TITLE_CHARS:
        raise ValidationError(f"title is {len(title)} characters, over {MAX_TITLE_CHARS}")
    if _TITLE_CONTROL.search(title):
        raise ValidationError(
            f"title must not contain control characters (newlines included): {title[:64]!r}"
        )
    try:
        title.encode("utf-8")
    except UnicodeEncodeError:
        raise ValidationError(
            f"title is not valid Unicode (a lone surrogate): {title[:64]!r}"
        ) from None
    return title


def metadata_args(metadata: Mapping[str, Any] | None, state: StoreState) -> list[Arg]:
    """``m:<key>``, msgpack value pairs for a shallow merge; validated before anything is sent.

    The call's own metadata must fit ``Limits.max_metadata_keys`` and ``max_metadata_bytes``
    (field names and values as stored); the script checks the merged total again, against what
    the chat already holds.
    """
    if metadata is None:
        return []
    if not isinstance(metadata, Mapping):
        raise ValidationError(f"metadata must be a mapping, got {type(metadata).__name__}")
    limits = state.limits
    check_metadata_size("metadata keys", len(metadata), limits.max_metadata_keys)
    args: list[Arg] = []
    size = 0
    for key, value in metadata.items():
        check_name(key, "metadata key")
        if key == USAGE_KEY:
            raise ValidationError(
                "metadata key 'usage' is kept by add_usage() and cannot be set directly"
            )
        field = METADATA_PREFIX + key
        packed = encode(
            value, what=f"metadata[{key!r}]", limit=limits.max_message_bytes, strict=True
        )
        size += len(field.encode("utf-8")) + len(packed)
        check_metadata_size("metadata bytes", size, limits.max_metadata_bytes)
        args += [field, packed]
    return args


def check_metadata_size(what: str, size: int, limit: int) -> None:
    """A chat's metadata within one of its bounds (the same error the scripts give)."""
    if size > limit:
        raise LimitExceededError(
            f"{what} is over its limit of {limit}", what=what, limit=limit, size=size
        )


def metadata_limit_args(state: StoreState) -> tuple[int, int]:
    """The ARGV of the scripts that merge metadata: the most keys and bytes a chat may hold."""
    return state.limits.max_metadata_keys, state.limits.max_metadata_bytes


def get_chat(
    state: StoreState,
    chat_id: str,
    *,
    user_id: str | None = None,
    incarnation: str | None = None,
) -> Operation[ChatMeta]:
    chat = state.keyspace.chat(chat_id)
    script = load_script("get_chat")
    reply = yield script_call(
        script,
        keys_for(script, chat),
        scope_args(user_id, incarnation),
        parse=lambda reply: reply,
        context=chat_context(chat_id),
    )
    meta: ChatMeta = yield from opened_chat(state, chat_id, chat.key("chat"), reply, chat_meta)
    state.owners.remember(chat_id, meta.user_id)
    return meta


def update_chat(
    state: StoreState,
    chat_id: str,
    *,
    title: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    user_id: str | None = None,
    incarnation: str | None = None,
) -> Operation[ChatMeta]:
    """Replace the title when given, shallow-merge metadata, bump ``updated_at``."""
    chat = state.keyspace.chat(chat_id)
    if title is not None:
        check_title(title)
    meta_args = metadata_args(metadata, state)
    seal, incarnation = yield from write_seal(state, chat_id, user_id, incarnation)
    if seal is not None:
        title = None if title is None else seal.seal_title(title)
        meta_args = sealed_metadata_args(seal, meta_args)
    now = state.clock()
    script = load_script("update_chat")
    owner = user_id if user_id is not None else state.owners.get(chat_id)
    keys = keys_for(script, chat)
    in_script_index = owner is not None and not state.cluster
    if in_script_index:  # the script moves the indexes itself, only when it succeeded
        keys = (*keys, *state.keyspace.indexes_of(owner or ""))
    call = script_call(
        script,
        keys,
        (
            *scope_args(user_id, incarnation),
            now,
            "0" if title is None else "1",
            title or "",
            chat_id if in_script_index else "",
            (owner or "") if in_script_index else "",
            *metadata_limit_args(state),
            "" if seal is None else "1",
            *meta_args,
        ),
        # The chat's times and owner, its values left for opened_chat (a sealed chat's).
        parse=lambda reply: (bool(reply[0]), chat_meta(chat_id, key, reply[1], HIDDEN), reply[1]),
        context=chat_context(chat_id),
        writes=True,
    )
    key = chat.key("chat")
    if in_script_index:
        indexed, meta, flat = yield call
        state.owners.remember(chat_id, meta.user_id)
        if not indexed:
            yield from touch_indexes(state, chat_id, meta.user_id, meta.updated_at)
    else:
        _indexed, meta, flat = yield from with_touch(
            state,
            chat_id,
            call,
            now,
            owner_of=lambda reply: reply[1].user_id,
            updated_at_of=lambda reply: reply[1].updated_at,
        )
    result: ChatMeta = yield from opened_chat(state, chat_id, key, flat, chat_meta)
    return result


def sealed_metadata_args(seal: ChatSeal, args: list[Arg]) -> list[Arg]:
    """The ``m:<key>``, value pairs of :func:`metadata_args` with each value sealed for its
    key (the names stay in the clear, as the usage counters among them: the scripts' limits
    read the names, ``add_usage`` adds to the counters)."""
    sealed: list[Arg] = []
    for index in range(0, len(args), 2):
        field, value = str(args[index]), args[index + 1]
        if field.startswith(METADATA_PREFIX):
            assert isinstance(value, bytes), "metadata_args packs every value"
            value = seal.seal_metadata(field[len(METADATA_PREFIX) :], value)
        sealed += [field, value]
    return sealed


def with_touch(
    state: StoreState,
    chat_id: str,
    call: Call[T],
    now: int,
    owner_of: Callable[[T], str],
    updated_at_of: Callable[[T], int],
) -> Operation[T]:
    """Run a write that bumps ``updated_at`` and move the chat forward in its indexes.

    With the owner cached, the index touches share the script's round trip (``touch_index.lua``
    at ``now``, each returning the score it replaced). If the script then fails, one more
    round trip puts those scores back, so a refused write never moves the chat in a listing.
    Without a cached owner the touches follow the script, with the owner and time its reply
    names. Index failures never fail the write: the write is done, and a stale index entry is
    repaired by the next listing that reads it.
    """
    owner = state.owners.get(chat_id)
    if owner is not None:
        outcomes = yield (call, *indexes.touch_script_calls(state, chat_id, owner, now))
        log_index_failures(outcomes[1:])
        if isinstance(outcomes[0], CtxStoreError):
            restores = indexes.restore_calls(state, chat_id, owner, now, outcomes[1:])
            if restores:
                log_index_failures((yield restores))
        first: T = _first(outcomes)
        return first
    result: T = yield call
    owner = owner_of(result)
    state.owners.remember(chat_id, owner)
    yield from touch_indexes(state, chat_id, owner, updated_at_of(result))
    return result


def touch_indexes(state: StoreState, chat_id: str, owner: str, updated_at: int) -> Operation[None]:
    """Move the chat to ``updated_at`` in its owner's and the namespace's index (its own step)."""
    touched = yield indexes.touch_calls(state, chat_id, owner, updated_at, "GT")
    log_index_failures(touched)


def scope_args(user_id: str | None, incarnation: str | None) -> tuple[str, str]:
    """ARGV[1..2] of every chat script: the caller (refuses another owner's chat) and the
    incarnation the caller knows (refuses a chat deleted or re-created since), "" for either."""
    if user_id is not None:
        check_key_id(user_id, "user_id")
    return user_id or "", incarnation or ""


def _first(outcomes: list[Any]) -> Any:
    """The first outcome of a batch; raises it when it is an error."""
    first = outcomes[0]
    if isinstance(first, CtxStoreError):
        raise first
    return first


def log_index_failures(outcomes: list[Any]) -> None:
    for outcome in outcomes:
        if isinstance(outcome, CtxStoreError):
            log.warning("chat index update failed (a later listing repairs it): %s", outcome)


def add_usage(
    state: StoreState,
    chat_id: str,
    usage: Mapping[str, Any] | object,
    *,
    user_id: str | None = None,
    incarnation: str | None = None,
) -> Operation[dict[str, int]]:
    """Add token counts (any provider's spelling) to the chat's counters; returns the totals."""
    chat = state.keyspace.chat(chat_id)
    counters = normalize_usage(usage)
    args: list[Arg] = [*scope_args(user_id, incarnation), new_request_id()]
    for name, value in counters.items():
        args += [USAGE_PREFIX + name, value]
    script = load_script("add_usage")
    totals: dict[str, int] = yield script_call(
        script,
        keys_for(script, chat),
        args,
        parse=lambda reply: {
            name[len(USAGE_PREFIX) :]: field_count(value, chat.key("chat"), name)
            for name, value in pairs(telemetry.recalled(reply), chat.key("chat")).items()
        },
        context=chat_context(chat_id),
        writes=True,
    )
    return totals


def delete_chat(state: StoreState, chat_id: str, *, user_id: str | None = None) -> Operation[bool]:
    """Delete every key of the chat (only the owner's, with ``user_id``), then its index entries
    and its entry in its owner's record (see :mod:`ctxstore._core.ops.owner_records`)."""
    deleted: DeletedChat = yield delete_call(state, chat_id, user_id=user_id)
    if deleted.deleted:
        follow = forgetting_calls(state, chat_id, deleted)
        if follow:
            log_index_failures((yield follow))
    return deleted.deleted


@dataclass(frozen=True)
class DeletedChat:
    """What ``delete_chat.lua`` removed."""

    deleted: bool
    owner: str
    incarnation: str
    keys: int
    messages: int
    stream_entries: int


def delete_call(
    state: StoreState, chat_id: str, *, user_id: str | None = None, leftovers: bool = False
) -> Call[DeletedChat]:
    """The script that unlinks the chat's keys (only ``user_id``'s chat, when given; with
    ``leftovers``, also the keys of a chat whose hash is gone or names no owner)."""
    chat = state.keyspace.chat(chat_id)
    if user_id is not None:
        check_key_id(user_id, "user_id")
    script = load_script("delete_chat")
    return script_call(
        script,
        keys_for(script, chat),
        (user_id or "", "1" if leftovers else ""),
        parse=lambda reply: DeletedChat(
            bool(reply[0]),
            text(reply[1]),
            text(reply[2]),
            int(reply[3]),
            int(reply[4]),
            int(reply[5]),
        ),
        context=chat_context(chat_id),
        writes=lambda deleted: deleted.deleted,
    )


def forgetting_calls(
    state: StoreState, chat_id: str, deleted: DeletedChat
) -> tuple[Call[Any], ...]:
    """After a chat's keys are gone: forget it in this process, and remove its index entries
    and its owner-record entry (other slots: their own round trip)."""
    state.owners.forget(chat_id)
    state.cache.forget(chat_id)
    if not deleted.owner:
        return ()
    return (
        *indexes.removal_calls(state, chat_id, deleted.owner),
        *owner_records.forget_calls(state, deleted.owner, [(chat_id, deleted.incarnation)]),
    )
