"""A sealed value: ``"cs1" | key id length | key id | nonce | ciphertext | tag``.

The header names the data key that sealed the value (so a value sealed before a key changed
still opens) and is authenticated with it; the associated data binds the value to its place
(the caller's: a chat, a position, a parent), so a value copied elsewhere does not open.
"""

from __future__ import annotations

import re
from typing import Any

from ctxstore.crypto.aead import Cipher, UnauthenticError, decrypt, encrypt
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


class SealingKey:
    """One data key ready to seal and open many values: its id, the header its values carry
    and its cipher, made once (a chain of a thousand messages opens under one key)."""

    __slots__ = ("_cipher", "header", "key_id")

    def __init__(self, key_id: str, key: bytes) -> None:
        name = check_key_id(key_id).encode()
        self.key_id = key_id
        self.header = MAGIC + bytes((len(name),)) + name
        self._cipher = Cipher(key)

    def seal(self, plaintext: bytes, aad: bytes) -> bytes:
        """``plaintext`` sealed under this key, bound to ``aad`` (and to the header)."""
        return self.header + self._cipher.encrypt(plaintext, self.header + aad)

    def open(self, value: bytes, aad: bytes) -> bytes:
        """The plaintext of ``value`` (sealed under this key: the caller looked it up by
        :func:`value_key_id`); :class:`~ctxstore.crypto.aead.UnauthenticError` when it does
        not open (moved from its place, altered, another key's): the caller names the place."""
        size = len(self.header)
        if value[:size] != self.header:
            raise UnauthenticError(f"not sealed with key {self.key_id!r}")
        return self._cipher.decrypt(value[size:], self.header + aad)

    def raw_decrypt(self) -> tuple[Any, type[Exception]]:
        """The cipher's ``decrypt(nonce, ciphertext, aad)`` and its refusal (see
        :meth:`~ctxstore.crypto.aead.Cipher.raw_decrypt`): ``aad`` is ``header + aad``, the
        nonce the :data:`~ctxstore.crypto.aead.NONCE_BYTES` after the header."""
        return self._cipher.raw_decrypt()

    def open_bound(self, value: bytes, bound: bytes) -> bytes:
        """:meth:`open` for a caller that checked ``value``'s header is this key's and made
        ``header + aad`` itself (once per chat for all but the record's place: a chain of many
        records opens without building each one's associated data from its parts)."""
        return self._cipher.decrypt(value[len(self.header) :], bound)


def value_key_id(value: bytes) -> str | None:
    """The key id a sealed value names, None when ``value`` has no well-formed header (the
    caller reports it where it knows the place)."""
    if value[:3] != MAGIC or len(value) < 5:
        return None
    end = 4 + value[3]
    try:
        key_id = value[4:end].decode("ascii")
    except UnicodeDecodeError:
        return None
    return key_id if len(value) >= end and _KEY_ID.fullmatch(key_id) else None
