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
) -> bytes:
    """A member from checked parts (``tokens`` within :data:`MAX_SUMMARY_TOKENS`, ``content``
    a text); the record is encoded as strictly as chat metadata (it is read back whole)."""
    record = {
        "message_id": message_id,
        "created_at": created_at,
        "content": content,
        "metadata": dict(metadata),
    }
    body = encode(record, what=what, limit=limit, strict=True)
    return tokens.to_bytes(SUMMARY_TOKEN_BYTES, "big") + body


def parse_summary_member(raw: object, key: str, position: int) -> StoredSummary:
    """A summary member as stored, scored with ``position``; checked as ``summary_record_ok``
    checks it in the scripts."""
    field = str(position)
    if not isinstance(raw, bytes) or len(raw) <= SUMMARY_TOKEN_BYTES:
        raise corrupt(key, field, "a summary without a record")
    record = decode(raw[SUMMARY_TOKEN_BYTES:], key=key, field=field)
    if (
        type(record) is not dict
        or type(record.get("message_id")) is not str
        or type(record.get("content")) is not str
        or type(record.get("metadata")) is not dict
        or type(record.get("created_at")) is not int
    ):
        raise corrupt(key, field, "not a summary record")
    return {
        "message_id": record["message_id"],
        "created_at": record["created_at"],
        "content": record["content"],
        "metadata": record["metadata"],
        "tokens": int.from_bytes(raw[:SUMMARY_TOKEN_BYTES], "big"),
    }
