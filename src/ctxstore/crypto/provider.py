"""The protocol of a key provider: what a store needs of the keys that protect its data keys.

A store seals each user's records with that user's data key (random, 32 bytes) and keeps the
data key only wrapped, under a key-encryption key the provider holds. The provider is the only
place that can unwrap it, so destroying what it holds for a user (``destroy``) makes every copy
of that user's records, backups included, unreadable. A KMS fits: ``wrap`` / ``unwrap`` are its
encrypt and decrypt of a small blob, bound to the subject as its encryption context.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class KeyProvider(Protocol):
    """Wraps and unwraps data keys, one subject (a chat owner) at a time."""

    @property
    def current_key_id(self) -> str:
        """The id of the key-encryption key new data keys are wrapped with."""
        ...

    def wrap(self, data_key: bytes, *, subject: str) -> bytes:
        """``data_key`` sealed for ``subject`` under the current key-encryption key; the result
        names that key's id, so it unwraps after the current key changes."""
        ...

    def unwrap(self, wrapped: bytes, *, subject: str) -> bytes:
        """The data key ``wrap`` sealed. Raises ``KeyUnavailableError`` when what opens it is
        gone (the subject destroyed, its key-encryption key removed), ``CorruptionError`` when
        ``wrapped`` is not a key wrapped for ``subject``."""
        ...

    def destroy(self, subject: str) -> None:
        """Make every key wrapped for ``subject`` impossible to unwrap, for good."""
        ...
