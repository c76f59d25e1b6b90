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


def derive(key: bytes, *, salt: bytes, info: bytes) -> bytes:
    """A 32-byte key from ``key`` and ``salt`` for the purpose ``info`` (HKDF-SHA256)."""
    _aesgcm, hkdf, hashes, _invalid = _primitives()
    derived: bytes = hkdf(algorithm=hashes.SHA256(), length=KEY_BYTES, salt=salt, info=info).derive(
        key
    )
    return derived
