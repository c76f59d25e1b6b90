"""Summary members: what the chat's ``summary`` ZSET holds, one per summarized message.

A member is scored by the position of the last message the summary covers and holds
:data:`SUMMARY_TOKEN_BYTES` bytes of the summary's token count (big-endian: what the scripts add
to a chain's size) followed by a msgpack map ``{"message_id", "created_at", "content",
"metadata"}``. Writing a summary and importing one both build it with :func:`summary_member`;
every reader parses it with :func:`parse_summary_member`, which checks it as the scripts'
``summary_record_ok`` does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ctxstore._core.format.codec import decode, encode
from ctxstore._core.format.fields import corrupt
from ctxstore._core.format.sealed import ChatSeal, summary_kind
from ctxstore.errors import ConfigurationError
from ctxstore.models import StoredSummary

#: Bytes of a member's token count.
SUMMARY_TOKEN_BYTES = 5
#: The largest token count a member holds (40 bits).
MAX_SUMMARY_TOKENS = (1 << 40) - 1


def summary_member(
    *,
    message_id: str,
    created_at: int,
    content: str,
    metadata: Mapping[str, Any],
    tokens: int,
    limit: int,
    what: str = "summary",
    seal: ChatSeal | None = None,
) -> bytes:
    """A member from checked parts (``tokens`` within :data:`MAX_SUMMARY_TOKENS`, ``content``
    a text); the record is encoded as strictly as chat metadata (it is read back whole).
    ``seal`` (a sealed chat's): the content and the metadata are sealed together, bound to the
    chat's incarnation and the message the summary covers, and the record holds that sealed
    value as its ``content`` (a msgpack ``bin``) and an empty ``metadata``: the scripts read
    only the tokens and the record's shape."""
    record: dict[str, Any] = {
        "message_id": message_id,
        "created_at": created_at,
        "content": content,
        "metadata": dict(metadata),
    }
    if seal is not None:
        inner = encode(
            {"content": content, "metadata": dict(metadata)}, what=what, limit=limit, strict=True
        )
        sealed = seal.keys_current_seal(summary_kind(message_id), inner)
        record = {**record, "content": sealed, "metadata": {}}
    body = encode(record, what=what, limit=limit, strict=True)
    return tokens.to_bytes(SUMMARY_TOKEN_BYTES, "big") + body


def parse_summary_member(
    raw: object, key: str, position: int, seal: ChatSeal | None = None
) -> StoredSummary:
    """A summary member as stored, scored with ``position``; checked as ``summary_record_ok``
    checks it in the scripts. A sealed one (its ``content`` a sealed value) is opened with
    ``seal``; without one it is a ``ConfigurationError`` (a store without the keys), and a
    summary in the clear where ``seal`` is given is corruption (a sealed chat's are sealed)."""
    field = str(position)
    if not isinstance(raw, bytes) or len(raw) <= SUMMARY_TOKEN_BYTES:
        raise corrupt(key, field, "a summary without a record")
    record = decode(raw[SUMMARY_TOKEN_BYTES:], key=key, field=field)
    if (
        type(record) is not dict
        or type(record.get("message_id")) is not str
        or type(record.get("content")) not in (str, bytes)
        or type(record.get("metadata")) is not dict
        or type(record.get("created_at")) is not int
    ):
        raise corrupt(key, field, "not a summary record")
    if type(record["content"]) is bytes or seal is not None:
        record = _opened(record, key, position, seal)
    return {
        "message_id": record["message_id"],
        "created_at": record["created_at"],
        "content": record["content"],
        "metadata": record["metadata"],
        "tokens": int.from_bytes(raw[:SUMMARY_TOKEN_BYTES], "big"),
    }


def closed_summary(raw: bytes, key: str, position: int) -> StoredSummary:
    """A sealed summary member as its record says, its content and metadata left closed (""
    and {}): what a check without the keys can read of it (its message, time, tokens)."""
    record = decode(raw[SUMMARY_TOKEN_BYTES:], key=key, field=str(position))
    return {
        "message_id": record["message_id"],
        "created_at": record["created_at"],
        "content": "",
        "metadata": {},
        "tokens": int.from_bytes(raw[:SUMMARY_TOKEN_BYTES], "big"),
    }


def _opened(
    record: dict[str, Any], key: str, position: int, seal: ChatSeal | None
) -> dict[str, Any]:
    """A sealed summary record with its content and metadata opened."""
    if seal is None:
        raise ConfigurationError(
            f"{key} holds sealed summaries (a chat of a store with encryption): this store has "
            "none; connect with encryption=<the KeyProvider> (docs/encryption.md)",
            key=key,
            field=str(position),
        )
    inner = seal.open(summary_kind(record["message_id"]), record["content"], 0, 0, key=key)
    if type(inner.get("content")) is not str or type(inner.get("metadata")) is not dict:
        raise corrupt(key, str(position), "the sealed summary is not a summary's content")
    return {**record, "content": inner["content"], "metadata": inner["metadata"]}
