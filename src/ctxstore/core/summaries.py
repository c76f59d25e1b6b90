"""Graph-native summaries: a summary hangs on the last message it covers (write_summary.lua).

A summary applies to every chain that holds its message: branches forked after that message
share it, branches forked before it never see it, and messages appended while it was made come
after it, untouched. Reads with ``summaries`` on (``lua/get_chain.lua``) start after the newest
summary on the chain and return it. A summary is written once and never changed; a later
compaction rolls over it (covers it and the newer messages) under a newer message.

In Redis a summary is a member of the chat's ``summary`` ZSET, scored by its message's position:
5 bytes of its token count (what the scripts add to a chain's size), then a msgpack map
``{"message_id", "created_at", "content", "metadata"}``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

from ctxstore.core.chats import chat_context, keys_for, scope_args
from ctxstore.core.codec import decode, encode
from ctxstore.core.ids import check_name
from ctxstore.core.protocol import Operation, script_call
from ctxstore.core.records import corrupt
from ctxstore.core.scripts import load_script
from ctxstore.core.state import StoreState
from ctxstore.errors import ValidationError
from ctxstore.prompting import CONTEXT_SUMMARY
from ctxstore.results import StoredSummary

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


def summary_message(summary: StoredSummary) -> dict[str, Any]:
    """The summary as a message of a plain list: an assistant message marked as a context
    summary (``ctxstore.is_context_summary`` tells; ``prepare_messages`` moves it into the
    system prompt, so no marker reaches a provider)."""
    return {
        "role": "assistant",
        "content": summary["content"],
        "metadata": dict(summary["metadata"]),
    }


class WrittenSummary(TypedDict):
    """What writing a summary did: whether this call wrote it (False: one existed and is
    returned), the summary, and the chain it covers (messages, tokens through its message)."""

    written: bool
    summary: StoredSummary
    covered_messages: int
    covered_tokens: int


def write_summary(
    state: StoreState,
    chat_id: str,
    message_id: str,
    content: str,
    metadata: Mapping[str, Any] | None = None,
    tokens: int | None = None,
    *,
    job: str = "",
    user_id: str | None = None,
    incarnation: str | None = None,
) -> Operation[WrittenSummary]:
    """Attach a summary to ``message_id`` (the last message it covers), once: a second summary
    of the same message writes nothing and returns the first (a retried job is a no-op).
    ``tokens`` defaults to the store's count of the summary as an assistant message."""
    chat = state.keyspace.chat(chat_id)
    check_name(message_id, "message_id")
    if tokens is None:
        if not isinstance(content, str):
            raise ValidationError("a summary needs a non-empty text")
        tokens = state.message_tokens({"role": "assistant", "content": content})
    member = summary_member(state, message_id, content, metadata or {}, tokens, state.clock())
    script = load_script("write_summary")
    key = chat.key("summary")

    def parse(reply: Sequence[Any]) -> WrittenSummary:
        position, written, stored, covered_tokens, depth = reply
        return {
            "written": bool(int(written)),
            "summary": parse_summary_member(stored, key, int(position)),
            "covered_messages": int(depth),
            "covered_tokens": int(covered_tokens),
        }

    result: WrittenSummary = yield script_call(
        script,
        keys_for(script, chat),
        (*scope_args(user_id, incarnation), message_id, member, job),
        parse=parse,
        context=chat_context(chat_id),
        writes=True,
    )
    return result
