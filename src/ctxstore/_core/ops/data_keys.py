"""The operations of a store with encryption around a chat's sealed values: its owner's data
keys (read, or made by the first write that needs them; see :mod:`ctxstore._core.keyring`), and
opening what a read returned with them.

A read opens its records after its reply, with the owner's keys as this process holds them:
a warm process opens without a round trip more; a cold one reads the owner's keys (one
``HGETALL``, and one unwrap by the provider per data key) the first time. A value naming a key
the held keys do not have makes the keys read once more (another process may have made them),
then it is corruption: a value of another user's chat.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from ctxstore._core.format.chat import (
    HIDDEN,
    ChatValues,
    check_incarnation,
    check_owner,
    has_sealed_values,
)
from ctxstore._core.format.fields import corrupt, field_text, pairs
from ctxstore._core.format.sealed import (
    ChatSeal,
    ClosedSeal,
    MissingDataKeyError,
    plain_chat_error,
    sealed_chat_error,
)
from ctxstore._core.format.versions import (
    FORMAT,
    FORMATS_READ,
    SEALED_FORMAT,
    chat_format_error,
)
from ctxstore._core.keyring import (
    CURRENT_FIELD,
    OwnerKeys,
    new_data_key_id,
    subject_of,
)
from ctxstore._core.ops.scanning import each_key_batch
from ctxstore._core.protocol import Arg, Operation, command_call, raise_first_error, script_call
from ctxstore._core.scripts import load_script
from ctxstore._core.state import StoreState
from ctxstore.crypto.aead import KEY_BYTES, random_key
from ctxstore.crypto.provider import KeyProvider
from ctxstore.crypto.seal import SealingKey
from ctxstore.errors import (
    ChatNotFoundError,
    ConfigurationError,
    CorruptionError,
    KeyUnavailableError,
)
from ctxstore.models import KeyRotation

R = TypeVar("R")


def provider_of(state: StoreState) -> KeyProvider:
    provider = state.settings.encryption
    if provider is None:
        raise ConfigurationError(
            "this store has no encryption: connect with encryption=<the KeyProvider>"
        )
    return provider


def owner_keys(state: StoreState, user_id: str, *, create: bool = False) -> Operation[OwnerKeys]:
    """``user_id``'s data keys: as this process holds them, else read (and with ``create``,
    the first one made and stored when the user has none)."""
    held = state.caches.data_keys.get(user_id)
    if held is not None:
        return held
    keys: OwnerKeys = yield from read_keys(state, user_id, create=create)
    return keys


def read_keys(state: StoreState, user_id: str, *, create: bool) -> Operation[OwnerKeys]:
    """``user_id``'s data keys as Redis holds them, unwrapped, and kept for the next call."""
    provider = provider_of(state)
    key = state.keyspace.data_keys(user_id)
    subject = subject_of(state.keyspace.namespace, user_id)
    made: tuple[str, bytes] | None = None
    if create:
        made = (new_data_key_id(), random_key())
        wrapped = provider.wrap(made[1], subject=subject)
        reply = yield script_call(
            load_script("data_key"), (key,), (made[0], wrapped), parse=_identity, writes=True
        )
    else:
        reply = yield command_call(("HGETALL", key), keys=(key,))
    fields = pairs(reply, key)
    if not fields:
        return OwnerKeys(user_id, subject, None, {})  # none yet (or erased): not kept
    current = field_text(fields.pop(CURRENT_FIELD, None), key, CURRENT_FIELD)
    if current not in fields:
        raise corrupt(key, CURRENT_FIELD, f"names the data key {current!r}, which is not there")
    by_id: dict[str, SealingKey] = {}
    unavailable: dict[str, KeyUnavailableError] = {}
    for key_id, wrapped_key in fields.items():
        if made is not None and key_id == made[0]:
            by_id[key_id] = SealingKey(key_id, made[1])
            continue
        try:
            raw = provider.unwrap(bytes(wrapped_key), subject=subject)
        except KeyUnavailableError as error:
            unavailable[key_id] = KeyUnavailableError(
                f"the data key {key_id!r} of user {user_id!r} cannot be unwrapped: {error}",
                subject=user_id,
                key_id=key_id,
            )
            continue
        except CorruptionError as error:
            raise corrupt(key, key_id, f"not a data key of user {user_id!r} ({error})") from None
        if len(raw) != KEY_BYTES:
            raise corrupt(key, key_id, f"unwraps to {len(raw)} bytes, not a data key")
        by_id[key_id] = SealingKey(key_id, raw)
    if current not in by_id:
        raise unavailable[current]
    keys = OwnerKeys(user_id, subject, by_id[current], by_id, unavailable)
    state.caches.data_keys.remember(keys)
    return keys


def _identity(reply: Any) -> Any:
    return reply


def chat_owner(state: StoreState, chat_id: str, user_id: str | None) -> Operation[str]:
    """The owner of ``chat_id``: the caller (a scoped call reads only its own chats), the one
    this process learned, else read (an admin's first call on the chat)."""
    if user_id is not None:
        return user_id
    known = state.owners.get(chat_id)
    if known is not None:
        return known
    chat_key = state.keyspace.chat(chat_id).key("chat")
    raw = yield command_call(("HGET", chat_key, "user_id"), keys=(chat_key,))
    if raw is None:
        raise ChatNotFoundError(f"chat {chat_id!r} does not exist", chat_id=chat_id)
    owner = field_text(raw, chat_key, "user_id")
    state.owners.remember(chat_id, owner)
    return owner


def write_seal(
    state: StoreState, chat_id: str, user_id: str | None, incarnation: str | None
) -> Operation[tuple[ChatSeal | None, str | None]]:
    """What a write of a chat-level value (a summary) seals it with, and the incarnation to
    send (the script refuses the write, REPLACED, if the chat is another incarnation by then):
    the caller's, else the one this process last saw of the chat, else read (one ``HGET``).
    ``(None, incarnation)`` for a store without encryption."""
    if state.settings.encryption is None:
        return None, incarnation
    owner = yield from chat_owner(state, chat_id, user_id)
    keys = yield from owner_keys(state, owner)
    known = (incarnation or "").partition("#")[0]
    if not known and (user_id is None or state.owners.get(chat_id) == user_id):
        # Only for a chat this process knows to be the caller's: a guessed incarnation sent for
        # another user's chat would be refused as "re-created", not as a missing chat.
        place = state.caches.places.get(chat_id)
        known = place.incarnation if place is not None else ""
    if not known:
        chat_key = state.keyspace.chat(chat_id).key("chat")
        holder, raw = yield command_call(("HMGET", chat_key, "user_id", "inc"), keys=(chat_key,))
        if raw is None or (user_id is not None and holder != user_id.encode()):
            # Another user's chat answers as a missing one, as the script would: the
            # incarnation read here is never sent for a chat the caller may not see.
            raise ChatNotFoundError(f"chat {chat_id!r} does not exist", chat_id=chat_id)
        known = field_text(raw, chat_key, "inc")
    if keys.current is None:  # a sealed chat whose open stopped before making the key
        keys = yield from made_keys(state, chat_id, owner, user_id)
    return ChatSeal(keys, state.keyspace.namespace, chat_id, known), incarnation or known


def made_keys(
    state: StoreState, chat_id: str, owner: str, user_id: str | None
) -> Operation[OwnerKeys]:
    """The first data key of ``owner``, for a write to ``chat_id`` whose owner has none: made
    only once the chat is seen to be a sealed chat of the caller's (one ``HMGET``, only then),
    so a write the script would refuse (a chat in the clear, another user's, a missing one)
    leaves no key behind."""
    chat_key = state.keyspace.chat(chat_id).key("chat")
    holder, found = yield command_call(("HMGET", chat_key, "user_id", "fmt"), keys=(chat_key,))
    if holder is None or (user_id is not None and holder != user_id.encode()):
        raise ChatNotFoundError(f"chat {chat_id!r} does not exist", chat_id=chat_id)
    fmt = field_text(found, chat_key, "fmt") if found is not None else "none"
    if fmt == FORMAT:
        raise plain_chat_error(chat_key, chat_id)
    if fmt != SEALED_FORMAT:
        raise chat_format_error(fmt, chat_id=chat_id)
    keys: OwnerKeys = yield from owner_keys(state, owner, create=True)
    return keys


def fresh_seal(
    state: StoreState, chat_id: str, owner: str, incarnation: str
) -> Operation[ChatSeal | None]:
    """The seal of a sealed chat with its owner's keys read now (an operator's check of every
    record: a key made by another process since is found), None without encryption."""
    if state.settings.encryption is None:
        return None
    state.caches.data_keys.forget(owner)
    keys = yield from owner_keys(state, owner)
    return ChatSeal(keys, state.keyspace.namespace, chat_id, incarnation)


def opened(
    state: StoreState,
    chat_id: str,
    owner: str | None,
    incarnation: str,
    decode: Callable[[ChatSeal | None], R],
) -> Operation[R]:
    """``decode(seal)`` of what a read of ``chat_id`` (of ``incarnation``) returned: with None
    for a store without encryption, else with the owner's keys (read once more when a value
    names a key they do not hold)."""
    if state.settings.encryption is None:
        if state.show_closed:
            shown: R = yield from _shown_closed(state, chat_id, incarnation, decode)
            return shown
        return decode(None)
    user_id = yield from chat_owner(state, chat_id, owner)
    keys = yield from owner_keys(state, user_id)
    namespace = state.keyspace.namespace
    try:
        return decode(ChatSeal(keys, namespace, chat_id, incarnation))
    except MissingDataKeyError:
        state.caches.data_keys.forget(user_id)
    keys = yield from owner_keys(state, user_id)
    try:
        return decode(ChatSeal(keys, namespace, chat_id, incarnation))
    except MissingDataKeyError as missing:
        chat_key = state.keyspace.chat(chat_id).key("log")
        if not keys.by_id:
            raise KeyUnavailableError(
                f"the data key {missing.key_id!r} of user {user_id!r} is gone: the user has no "
                f"data key in {state.keyspace.data_keys(user_id)} (erased: its keys were "
                "destroyed)",
                subject=user_id,
                key_id=missing.key_id,
                chat_id=chat_id,
            ) from None
        raise CorruptionError(
            f"corrupt data at {chat_key}: a value sealed with key {missing.key_id!r}, which is "
            f"not a data key of the chat's owner (copied from another user's chat)",
            key=chat_key,
            key_id=missing.key_id,
            chat_id=chat_id,
        ) from None


def _shown_closed(
    state: StoreState, chat_id: str, incarnation: str, decode: Callable[[ChatSeal | None], R]
) -> Operation[R]:
    """``decode`` for a store that shows a sealed chat closed (``StoreState.show_closed``):
    with :class:`ClosedSeal` for a sealed chat (a value in the clear in it is refused), as it
    is for one in the clear. Which one the chat is, the store remembers per incarnation (a
    chat's hash read tells it; else one ``HGET``, the first time)."""
    place = (chat_id, incarnation)
    sealed = state.sealed_chats.get(place)
    if sealed is None:
        chat_key = state.keyspace.chat(chat_id).key("chat")
        found = yield command_call(("HGET", chat_key, "fmt"), keys=(chat_key,))
        sealed = found == SEALED_FORMAT.encode()
        state.sealed_chats.put(place, sealed)
    if sealed:
        return decode(ClosedSeal())
    try:
        return decode(None)
    except ConfigurationError:  # sealed (migrate --encrypt) since this store saw it in the clear
        state.sealed_chats.put(place, True)
        return decode(ClosedSeal())


def opened_chat(
    state: StoreState,
    chat_id: str,
    key: str,
    reply: Sequence[Any] | Mapping[Any, Any],
    build: Callable[[str, str, Mapping[str, Any], ChatValues], R],
) -> Operation[R]:
    """``build(chat_id, key, fields, values)`` of a chat hash as a read returned it (a
    :func:`~ctxstore._core.format.chat.chat_meta`), its title and metadata values opened when
    the chat is sealed: with its owner's keys (a round trip only for a cold process, and only
    when it has such a value). A sealed chat read by a store without encryption is its
    ``ConfigurationError``; a chat in the clear read by a store with encryption is
    ``CorruptionError``."""
    fields = pairs(reply, key)
    raw_format = fields.get("fmt")
    found = raw_format.decode("utf-8", "replace") if isinstance(raw_format, bytes) else raw_format
    if found != SEALED_FORMAT:
        if state.settings.encryption is not None and found in FORMATS_READ:
            raise plain_chat_error(key, chat_id)
        if state.show_closed and found in FORMATS_READ and isinstance(fields.get("inc"), bytes):
            state.sealed_chats.put((chat_id, fields["inc"].decode("ascii", "replace")), False)
        return build(chat_id, key, fields, None)  # a format not read here: build says which
    if state.settings.encryption is None:
        if state.show_closed:
            incarnation = check_incarnation(fields.get("inc"), key)
            state.sealed_chats.put((chat_id, incarnation), True)
            return build(chat_id, key, fields, HIDDEN)
        raise sealed_chat_error(chat_id)
    if not has_sealed_values(fields):
        return build(chat_id, key, fields, None)
    owner = check_owner(fields.get("user_id"), key)
    incarnation = check_incarnation(fields.get("inc"), key)
    built: R = yield from opened(
        state, chat_id, owner, incarnation, lambda seal: build(chat_id, key, fields, seal)
    )
    return built


def rotate_keys(state: StoreState) -> Operation[KeyRotation]:
    """Every user's data keys of the namespace, wrapped again under the provider's current
    key-encryption key (``rewrap_keys.lua``, one call per user, each key replaced only while
    it holds what was read): keys wrapped under an older key-encryption key unwrap with the
    current one after, and no record is touched. A scan of every primary (an operator's
    call); idempotent."""
    provider = provider_of(state)
    found = {"users": 0, "data_keys": 0}
    prefix = state.keyspace.data_keys("x")[: -len("{x}")]

    def rewrap(keys: list[str]) -> Operation[None]:
        replies = yield tuple(command_call(("HGETALL", key), keys=(key,)) for key in keys)
        calls = []
        for key, reply in zip(keys, replies, strict=True):
            if isinstance(reply, BaseException):
                raise reply
            user_id = key[len(prefix) + 1 : -1]
            subject = subject_of(state.keyspace.namespace, user_id)
            triples: list[Arg] = []
            for key_id, wrapped in pairs(reply, key).items():
                if key_id == CURRENT_FIELD:
                    continue
                raw = provider.unwrap(bytes(wrapped), subject=subject)
                triples += [key_id, bytes(wrapped), provider.wrap(raw, subject=subject)]
            found["users"] += 1
            if triples:
                calls.append(
                    script_call(
                        load_script("rewrap_keys"), (key,), tuple(triples), parse=int, writes=True
                    )
                )
            state.caches.data_keys.forget(user_id)
        if calls:
            outcomes = yield tuple(calls)
            raise_first_error(outcomes)
            found["data_keys"] += sum(outcomes)

    yield from each_key_batch(state, f"{prefix}{{*}}", rewrap)
    return KeyRotation(provider.current_key_id, found["users"], found["data_keys"])
