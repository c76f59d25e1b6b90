"""Generation of ids: request ids, message tags, chat incarnations (their validation is
:mod:`ctxstore._base.ids`)."""

from __future__ import annotations

import base64
import hashlib
import os
import re

from ctxstore._core.format.records import TAG_LENGTH
from ctxstore.errors import InvalidIdError

#: Bytes behind a generated or derived request id (16 URL-safe characters).
_ID_BYTES = 12


def new_request_id() -> str:
    """A write's request id: a resent call carries the same one and is recognized by it."""
    return _id_text(os.urandom(_ID_BYTES))


def id_hasher() -> hashlib.blake2b:
    """A hash whose :func:`hashed_id` names what was fed to it: the same input, the same id
    (a retry rebuilds its request id, an append's messages their digest)."""
    return hashlib.blake2b(digest_size=_ID_BYTES)


def hashed_id(hasher: hashlib.blake2b) -> str:
    """The id of what ``hasher`` (from :func:`id_hasher`) was fed: 16 URL-safe characters."""
    return _id_text(hasher.digest())


def _id_text(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode("ascii")


#: What a caller's own request id may be: what the scripts take (lua/lib/requests.lua).
MAX_REQUEST_ID_LENGTH = 64
_REQUEST_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


def check_request_id(request_id: object) -> str:
    """A caller's request id: 1 to 64 letters, digits, ``-`` or ``_`` (URL-safe, so a UUID, a
    ULID or an idempotency key from a header fits); anything else is an InvalidIdError."""
    if not isinstance(request_id, str) or not _REQUEST_ID.fullmatch(request_id):
        shown = request_id[:80] if isinstance(request_id, str) else type(request_id).__name__
        raise InvalidIdError(
            f"request_id must be 1 to {MAX_REQUEST_ID_LENGTH} letters, digits, '-' or '_', "
            f"got {shown!r}",
            what="request_id",
        )
    return request_id


def tags_for(request_id: str, digest: str, count: int) -> list[str]:
    """The tags of an append's messages, drawn from its request id and the digest of its
    messages: a retry of the same write (same request id, same messages) builds the same
    records under the same ids, so the first write's reply, which a retry gets back, names
    exactly what it stored. A random request id makes them as random as :func:`new_tags`."""
    return _tags_of(hashlib.shake_256(f"{request_id}\t{digest}".encode()).digest(4 * count))


def new_tags(count: int) -> list[str]:
    """A random tag per new message: the tail of its generated id. A position can be reused
    when Redis loses acknowledged writes; a tag makes sure its id is not."""
    return _tags_of(os.urandom(4 * count))


def _tags_of(raw: bytes) -> list[str]:
    """A tag (TAG_LENGTH lowercase base32 letters) for every 4 bytes of ``raw``."""
    letters = base64.b32encode(raw).decode("ascii").lower()
    return [letters[TAG_LENGTH * i : TAG_LENGTH * (i + 1)] for i in range(len(raw) // 4)]


def new_incarnation() -> str:
    """A chat's incarnation: 13 lowercase base32 characters (64 random bits), the tail of every
    generated message id of that chat (``<position>.<incarnation>``)."""
    return base64.b32encode(os.urandom(8)).decode("ascii").rstrip("=").lower()
