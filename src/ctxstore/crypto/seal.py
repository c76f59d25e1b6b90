"""A sealed value: ``"cs1" | key id length | key id | nonce | ciphertext | tag``.

The header names the data key that sealed the value (so a value sealed before a key changed
still opens) and is authenticated with it; the associated data binds the value to its place
(the caller's: a chat, a position, a parent), so a value copied elsewhere does not open.
"""

from __future__ import annotations

import re

from ctxstore.crypto.aead import UnauthenticError, decrypt, encrypt
from ctxstore.errors import ConfigurationError, CorruptionError

MAGIC = b"cs1"
_KEY_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")


def check_key_id(key_id: object) -> str:
    """A key id as sealed values and wrapped keys carry it: 1 to 64 letters, digits, . _ -."""
    if not isinstance(key_id, str) or _KEY_ID.fullmatch(key_id) is None:
        raise ConfigurationError(
            f"a key id is 1 to 64 letters, digits, '.', '_' or '-', got {key_id!r}"
        )
    return key_id


def seal(plaintext: bytes, *, key: bytes, key_id: str, aad: bytes) -> bytes:
    """``plaintext`` sealed under ``key`` (named ``key_id``), bound to ``aad``."""
    name = check_key_id(key_id).encode()
    header = MAGIC + bytes((len(name),)) + name
    return header + encrypt(key, plaintext, header + aad)


def is_sealed(value: bytes) -> bool:
    return value.startswith(MAGIC)


def sealed_key_id(value: bytes, *, where: str) -> str:
    """The id of the key that sealed ``value``; a ``CorruptionError`` naming ``where`` when
    ``value`` is no sealed value."""
    return _header(value, where)[1]


def open_sealed(value: bytes, *, key: bytes, aad: bytes, where: str) -> bytes:
    """The plaintext of ``value``; a ``CorruptionError`` naming ``where`` when it does not
    open under ``key`` and ``aad`` (moved from its place, altered, or another key's)."""
    header, key_id = _header(value, where)
    try:
        return decrypt(key, value[len(header) :], header + aad)
    except UnauthenticError as error:
        raise CorruptionError(
            f"{where}: the sealed value does not open where it stands (moved from another "
            f"place, altered, or not sealed with key {key_id!r})",
            key=where,
            key_id=key_id,
        ) from error


def _header(value: bytes, where: str) -> tuple[bytes, str]:
    if not value.startswith(MAGIC) or len(value) < len(MAGIC) + 2:
        raise CorruptionError(f"{where}: not a sealed value", key=where)
    size = value[len(MAGIC)]
    end = len(MAGIC) + 1 + size
    try:
        key_id = value[len(MAGIC) + 1 : end].decode("ascii")
    except UnicodeDecodeError:
        key_id = ""
    if _KEY_ID.fullmatch(key_id) is None or len(value) < end:
        raise CorruptionError(f"{where}: a sealed value with a malformed header", key=where)
    return value[:end], key_id
