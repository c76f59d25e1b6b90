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

from collections.abc import Callable
from typing import Any, TypeVar

from ctxstore._core.format.fields import corrupt, field_text, pairs
from ctxstore._core.format.sealed import ChatSeal, MissingDataKeyError
from ctxstore._core.keyring import (
    CURRENT_FIELD,
    OwnerKeys,
    new_data_key_id,
    subject_of,
)
from ctxstore._core.protocol import Operation, command_call, script_call
from ctxstore._core.scripts import load_script
from ctxstore._core.state import StoreState
from ctxstore.crypto.aead import KEY_BYTES, random_key
from ctxstore.crypto.provider import KeyProvider
from ctxstore.crypto.seal import SealingKey
from ctxstore.errors import ChatNotFoundError, CorruptionError, KeyUnavailableError

R = TypeVar("R")


def provider_of(state: StoreState) -> KeyProvider:
    provider = state.settings.encryption
    if provider is None:  # pragma: no cover - callers ask only stores with encryption
        raise AssertionError("the store has no encryption")
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
