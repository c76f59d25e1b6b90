"""AES-256-GCM and HKDF-SHA256, from ``cryptography`` (``ctxstore[crypto]``), imported on first
use: a well-kept, audited implementation, where code of ours would be a risk."""

from __future__ import annotations

import functools
import os
from typing import Any

from ctxstore.errors import ConfigurationError

KEY_BYTES = 32
NONCE_BYTES = 12
TAG_BYTES = 16


@functools.cache
def _primitives() -> tuple[Any, Any, Any, type[Exception]]:
    try:
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
        from cryptography.hazmat.primitives.kdf.hkdf import HKDF
    except ImportError as error:  # pragma: no cover - the extra is part of the test install
        raise ConfigurationError(
            "encryption needs the cryptography package: pip install 'ctxstore[crypto]'"
        ) from error
    return AESGCM, HKDF, hashes, InvalidTag


class UnauthenticError(Exception):
    """A sealed value that does not open under the key and associated data given."""


def random_key() -> bytes:
    return os.urandom(KEY_BYTES)


def encrypt(key: bytes, plaintext: bytes, aad: bytes) -> bytes:
    """``nonce || ciphertext || tag``, a fresh random nonce each call."""
    aesgcm, _hkdf, _hashes, _invalid = _primitives()
    nonce = os.urandom(NONCE_BYTES)
    sealed: bytes = aesgcm(key).encrypt(nonce, plaintext, aad)
    return nonce + sealed


def decrypt(key: bytes, sealed: bytes, aad: bytes) -> bytes:
    """The plaintext :func:`encrypt` sealed; :class:`UnauthenticError` when it does not open."""
    aesgcm, _hkdf, _hashes, invalid = _primitives()
    if len(sealed) < NONCE_BYTES + TAG_BYTES:
        raise UnauthenticError("shorter than a nonce and a tag")
    try:
        opened: bytes = aesgcm(key).decrypt(sealed[:NONCE_BYTES], sealed[NONCE_BYTES:], aad)
    except invalid as error:
        raise UnauthenticError("authentication failed") from error
    return opened


class Cipher:
    """AES-256-GCM under one key, its cipher object made once: a store seals and opens many
    values under the same few data keys, and making the object costs as much as a small seal."""

    __slots__ = ("_aesgcm", "_invalid")

    def __init__(self, key: bytes) -> None:
        aesgcm, _hkdf, _hashes, invalid = _primitives()
        self._aesgcm = aesgcm(key)
        self._invalid = invalid

    def encrypt(self, plaintext: bytes, aad: bytes) -> bytes:
        """``nonce || ciphertext || tag``, a fresh random nonce each call."""
        nonce = os.urandom(NONCE_BYTES)
        sealed: bytes = self._aesgcm.encrypt(nonce, plaintext, aad)
        return nonce + sealed

    def raw_decrypt(self) -> tuple[Any, type[Exception]]:
        """The cipher's own ``decrypt(nonce, ciphertext, aad)`` and the exception it raises when
        a value does not open: for a loop over many values that slices them itself (no Python
        call between it and the cipher per value)."""
        return self._aesgcm.decrypt, self._invalid

    def decrypt(self, sealed: bytes, aad: bytes) -> bytes:
        """The plaintext :meth:`encrypt` sealed; :class:`UnauthenticError` when it does not
        open."""
        if len(sealed) < NONCE_BYTES + TAG_BYTES:
            raise UnauthenticError("shorter than a nonce and a tag")
        try:
            opened: bytes = self._aesgcm.decrypt(sealed[:NONCE_BYTES], sealed[NONCE_BYTES:], aad)
        except self._invalid as error:
            raise UnauthenticError("authentication failed") from error
        return opened


def derive(key: bytes, *, salt: bytes, info: bytes) -> bytes:
    """A 32-byte key from ``key`` and ``salt`` for the purpose ``info`` (HKDF-SHA256)."""
    _aesgcm, hkdf, hashes, _invalid = _primitives()
    derived: bytes = hkdf(algorithm=hashes.SHA256(), length=KEY_BYTES, salt=salt, info=info).derive(
        key
    )
    return derived
