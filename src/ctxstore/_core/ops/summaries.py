"""Graph-native summaries: a summary hangs on the last message it covers (write_summary.lua).

A summary applies to every chain that holds its message: branches forked after that message
share it, branches forked before it never see it, and messages appended while it was made come
after it, untouched. Reads with ``summaries`` on (``lua/get_chain.lua``) start after the newest
summary on the chain and return it. A summary is written once and never changed; a later
compaction rolls over it (covers it and the newer messages) under a newer message.

In Redis a summary is a member of the chat's ``summary`` ZSET, scored by its message's position
(see :mod:`ctxstore._core.format.summaries`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ctxstore._base.ids import check_name
from ctxstore._core.format.sealed import ChatSeal
from ctxstore._core.format.summaries import (
    MAX_SUMMARY_TOKENS,
    parse_summary_member,
    summary_member,
)
from ctxstore._core.ops.chats import chat_context, keys_for, scope_args
from ctxstore._core.ops.data_keys import write_seal
from ctxstore._core.protocol import Operation, script_call
from ctxstore._core.scripts import load_script
from ctxstore._core.state import StoreState
from ctxstore.errors import ValidationError
from ctxstore.messages.summaries import CONTEXT_SUMMARY
from ctxstore.models import WrittenSummary


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
    seal, known = yield from write_seal(state, chat_id, user_id, incarnation)
    member = new_summary_member(state, message_id, content, metadata or {}, tokens, seal)
    script = load_script("write_summary")
    key = chat.key("summary")

    def parse(reply: Sequence[Any]) -> WrittenSummary:
        position, written, stored, covered_tokens, depth = reply
        return {
            "written": bool(int(written)),
            "summary": parse_summary_member(stored, key, int(position), seal),
            "covered_messages": int(depth),
            "covered_tokens": int(covered_tokens),
        }

    result: WrittenSummary = yield script_call(
        script,
        keys_for(script, chat),
        (*scope_args(user_id, known), message_id, member, job),
        parse=parse,
        context=chat_context(chat_id),
        writes=True,
    )
    return result


def new_summary_member(
    state: StoreState,
    message_id: str,
    content: str,
    metadata: Mapping[str, Any],
    tokens: int,
    seal: ChatSeal | None = None,
) -> bytes:
    """The member of a summary written now, validated (and sealed with ``seal``, a sealed
    chat's); its metadata is marked as a context summary
    (:data:`~ctxstore.messages.summaries.CONTEXT_SUMMARY`)."""
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
    return summary_member(
        message_id=message_id,
        created_at=state.clock(),
        content=content,
        metadata={**metadata, "type": CONTEXT_SUMMARY},
        tokens=tokens,
        limit=state.limits.max_message_bytes,
        seal=seal,
    )
