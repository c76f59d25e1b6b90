"""TODO docstring: ctxstore._core.format.summaries."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ctxstore._core.format.codec import decode, encode
from ctxstore._core.format.fields import corrupt
from ctxstore._core.state import StoreState
from ctxstore.errors import ValidationError
from ctxstore.messages.summaries import CONTEXT_SUMMARY
from ctxstore.models import StoredSummary

SUMMARY_TOKEN_BYTES = 5


MAX_SUMMARY_TOKENS = (1 << 40) - 1


def summary_member(
    state: StoreState,
    message_id: str,
    content: str,
    metadata: Mapping[str, Any],
    tokens: int,
    now: int,
) -> bytes:
    """The ZSET member of a new summary, validated."""
    if not isinstance(content, str) or not content.strip():
        raise ValidationError("a summary needs a non-empty text")
    if not isinstance(metadata, Mapping):
        raise ValidationError(f"summary metadata must be a mapping, got {metadata!r}")
    if (
        isinstance(tokens, bool)
        or not isinstance(tokens, int)
        or not 0 <= tokens <= MAX_SUMMARY_TOKENS
    ):
        raise ValidationError(f"a summary's tokens must be a non-negative int, got {tokens!r}")
    record = {
        "message_id": message_id,
        "created_at": now,
        "content": content,
        "metadata": {**metadata, "type": CONTEXT_SUMMARY},
    }
    body = encode(record, what="summary", limit=state.limits.max_message_bytes, strict=True)
    return tokens.to_bytes(SUMMARY_TOKEN_BYTES, "big") + body


def parse_summary_member(raw: object, key: str, position: int) -> StoredSummary:
    """A summary member as stored (see the module docstring), scored with ``position``; checked
    as ``summary_record_ok`` checks it in the scripts."""
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
