"""Users' data keys, as a store with encryption holds them: one per user, random, kept in Redis
only wrapped by the store's key provider (``<base>:dkey:{<user>}``, beside the user's owner
record), unwrapped once per process and kept here.

Every sealed value names the data key that sealed it (:class:`~ctxstore.crypto.seal.SealingKey`),
and every wrapped data key names the key-encryption key that wrapped it, so a rotation of
either leaves older values readable. The provider sees a user as a *subject*: the keyspace and
the user id (:func:`subject_of`): its namespace (the tenant) and the user id, so two tenants'
users of the same id are two subjects, and destroying one (erasing the user) leaves the other's
records readable. The key prefix is not part of it: a provider serves one deployment (two that
share a provider keep their namespaces apart).

The data key of a user is made by the first write that needs it (``data_key.lua``: two
processes that make it at once agree on the first one stored). Nothing here does I/O; the
operations that read and store the keys are in :mod:`ctxstore._core.ops.data_keys`.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from ctxstore._base.bounded import BoundedMap
from ctxstore.crypto.seal import SealingKey
from ctxstore.errors import KeyUnavailableError

#: Random base32 characters of a data key's id (40 bits: ids are compared, never guessed).
DATA_KEY_ID_CHARS = 8
#: The hash field naming a user's current data key.
CURRENT_FIELD = "current"


def new_data_key_id() -> str:
    """A fresh data key's id: ``dk`` and :data:`DATA_KEY_ID_CHARS` random base32 characters."""
    return "dk" + base64.b32encode(os.urandom(5)).decode("ascii").lower()[:DATA_KEY_ID_CHARS]


def subject_of(namespace: str | None, user_id: str) -> str:
    """What the key provider calls ``user_id`` of tenant ``namespace``: ``"<namespace> <user>"``
    (``" <user>"`` without a namespace; a namespace never holds whitespace, so the first space
    splits it)."""
    return f"{namespace or ''} {user_id}"


@dataclass(frozen=True)
class OwnerKeys:
    """One user's data keys, unwrapped: the current one (new values are sealed with it; None
    for a user who has none) and every one stored, by id; ``unavailable`` names those the
    provider could not unwrap (their key-encryption key gone), with the error opening a value
    under one raises."""

    user_id: str
    subject: str
    current: SealingKey | None
    by_id: Mapping[str, SealingKey]
    unavailable: Mapping[str, KeyUnavailableError] = field(default_factory=dict)


class DataKeyCache(BoundedMap[str, OwnerKeys]):
    """User id -> :class:`OwnerKeys` (the stores of one server and keyspace share it). A key of
    a user erased in this process is forgotten at once; another process's erasure is noticed
    when a value names a key id the cached keys do not hold, or when an unwrap is refused."""

    def remember(self, keys: OwnerKeys) -> None:
        self.put(keys.user_id, keys)

    def forget(self, user_id: str) -> None:
        self.pop(user_id)
