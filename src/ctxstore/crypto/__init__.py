"""Encryption at rest: the keys and the seal (docs/encryption.md).

:class:`KeyProvider` is what a store asks for the key-encryption keys (the protocol is small
enough for a KMS); :class:`LocalKeyProvider` keeps them in a directory of its own, or in
memory. :mod:`ctxstore.crypto.seal` seals a value with AES-256-GCM, bound to its place by
associated data. ``cryptography`` (``ctxstore[crypto]``) is imported with the first key used,
never by ``import ctxstore``.
"""

from __future__ import annotations

from ctxstore.crypto.local import LocalKeyProvider
from ctxstore.crypto.provider import KeyProvider

__all__ = ["KeyProvider", "LocalKeyProvider"]
