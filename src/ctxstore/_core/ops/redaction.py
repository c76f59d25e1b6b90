"""Redacting one message: the one change the immutable graph allows.

Two round trips. The first reads the message's record (``get_message.lua``, as its owner);
the client builds the redacted record from it (:mod:`ctxstore.messages.redaction`: the same
parent, time, chosen id and tag, so the message keeps its id and place on every branch) and
counts its tokens. The second is ``redact_message.lua``, one atomic script on the chat's slot:
it checks the record is still the one read (else the whole call starts over), replaces it,
moves the token totals of every position descending from it, drops the summaries written
from it, removes its answer stream's pieces, replaces a title made from it, enqueues a
compaction when a summary went, and moves the chat's redaction generation so no process serves
a copy it cached before. Checked before its first write; a second call finds the record
redacted already and writes nothing.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import msgpack

from ctxstore._base.ids import check_name
from ctxstore._core.format.codec import encode
from ctxstore._core.format.fields import field_text, text
from ctxstore._core.format.jobs import DEFAULT_KEEP
from ctxstore._core.format.records import encode_record, open_record, read_record
from ctxstore._core.format.sealed import METADATA, PAYLOAD, ChatSeal
from ctxstore._core.ops.chats import chat_context, keys_for, scope_args
from ctxstore._core.ops.data_keys import opened
from ctxstore._core.ops.jobs import enqueue_job
from ctxstore._core.protocol import Operation, command_call, raise_first_error, script_call
from ctxstore._core.scripts import load_script
from ctxstore._core.state import StoreState
from ctxstore.errors import ConflictError, CorruptionError, ValidationError
from ctxstore.messages.redaction import redacted_metadata, redacted_payload
from ctxstore.messages.text import collapsed_text, static_title
from ctxstore.models import Redaction

#: How often a redaction starts over when the record changed between its read and its write.
ATTEMPTS = 3
#: The longest reason a redaction records.
MAX_REASON_CHARS = 1024


def redact_message(
    state: StoreState,
    chat_id: str,
    message_id: str,
    *,
    reason: str | None = None,
    user_id: str | None = None,
    incarnation: str | None = None,
) -> Operation[Redaction]:
    """Replace the message's payload and metadata values by the store's redaction marker (see
    the module docstring)."""
    check_name(message_id, "message_id")
    _check_reason(reason)
    chat = state.keyspace.chat(chat_id)
    for _attempt in range(ATTEMPTS):
        read = _read_call(state, chat_id, message_id, user_id, incarnation)
        seen_title = None
        if state.settings.encryption is None:
            position, raw, message_id_read, inc = yield read
        else:  # the sealed title too, which the client opens to decide its replacement
            title_key = chat.key("chat")
            outcomes = yield (read, command_call(("HGET", title_key, "title"), keys=(title_key,)))
            raise_first_error(outcomes)
            (position, raw, message_id_read, inc), seen_title = outcomes
        call = yield from opened(
            state,
            chat_id,
            user_id,
            inc,
            functools.partial(
                _redact_call,
                state,
                chat_id,
                message_id_read,
                position,
                raw,
                reason,
                user_id,
                incarnation,
                seen_title,
            ),
        )
        try:
            redaction: Redaction = yield call
        except ConflictError as error:
            if error.details.get("reason") != "changed":
                raise
            continue
        state.cache.forget(chat_id)
        if redaction.compaction_job is not None and state.cluster:
            yield from enqueue_job(
                state,
                chat_id,
                ("chat", chat_id, "branch", redaction.branch, "job", redaction.compaction_job,
                 "soft", "", "keep", DEFAULT_KEEP),
            )  # fmt: skip
        return redaction
    raise ConflictError(
        f"message {message_id!r} of chat {chat.chat_id!r} kept changing while it was being "
        "redacted; try again",
        chat_id=chat_id,
    )


def _check_reason(reason: object) -> None:
    if reason is None:
        return
    if not isinstance(reason, str):
        raise ValidationError(f"reason must be a string or None, got {type(reason).__name__}")
    if len(reason) > MAX_REASON_CHARS:
        raise ValidationError(f"reason is {len(reason)} characters, over {MAX_REASON_CHARS}")


def _read_call(
    state: StoreState,
    chat_id: str,
    message_id: str,
    user_id: str | None,
    incarnation: str | None,
) -> Any:
    """The message's position and record as stored (``get_message.lua``)."""
    script = load_script("get_message")
    return script_call(
        script,
        keys_for(script, state.keyspace.chat(chat_id)),
        (*scope_args(user_id, incarnation), message_id),
        parse=lambda reply: (int(reply[0]), bytes(reply[1]), message_id, text(reply[4])),
        context=chat_context(chat_id),
    )


def _redact_call(
    state: StoreState,
    chat_id: str,
    message_id: str,
    position: int,
    raw: bytes,
    reason: str | None,
    user_id: str | None,
    incarnation: str | None,
    seen_title: object,
    seal: ChatSeal | None = None,
) -> Any:
    chat = state.keyspace.chat(chat_id)
    key = chat.key("log")
    parent, _created, payload, chosen, tag = read_record(raw, key, position, seal)
    fields = _record_parts(raw, key, position)
    if seal is not None:
        open_record(fields, position, seal, key)
    marker = state.settings.redaction_marker
    now = state.clock()
    redacted = redacted_payload(payload, marker)
    metadata = redacted_metadata(fields[3] if len(fields) == 6 else None, marker, reason, now)
    limit = state.limits.max_message_bytes
    body = encode(redacted, what="the redacted message", limit=limit)
    packed_metadata = encode(metadata, what="the redacted metadata", limit=limit, strict=True)
    stored_metadata = fields[3] if len(fields) == 6 else None
    if seal is not None and redacted == payload and metadata == stored_metadata:
        record = raw  # redacted already: sealed again it would differ (a new nonce), not change
    else:
        if seal is not None:  # sealed for the same place: its position and parent
            body = seal.seal(PAYLOAD, body, position, parent)
            packed_metadata = seal.seal(METADATA, packed_metadata, position, parent)
        record = encode_record(
            body,
            created_at=msgpack.packb(fields[1]),
            tag=tag,
            chosen=chosen or "",
            metadata=packed_metadata,
            parent=fields[0],
        )
    tokens = state.message_tokens(redacted)
    script = load_script("redact_message")
    keys = keys_for(script, chat)
    if not state.cluster:
        keys = (*keys, *state.keyspace.job_keys(chat_id))
    is_user = payload.get("role") == "user"
    title = static_title(collapsed_text(payload))
    replacement, made_from, seen = marker, title, ""
    if seal is not None:
        (replacement, made_from), seen = _sealed_title_args(
            seal, chat.key("chat"), seen_title, marker, title
        )
    title_args = (replacement, "1" if is_user else "0", made_from)
    return script_call(
        script,
        keys,
        (
            *scope_args(user_id, incarnation),
            position,
            raw,
            record,
            tokens,
            message_id,
            *title_args,
            now,
            chat_id,
            DEFAULT_KEEP,
            seen,
        ),
        parse=lambda reply: _parse(message_id, tokens, reply),
        context=chat_context(chat_id),
        writes=lambda done: done.redacted,
    )


def _sealed_title_args(
    seal: ChatSeal, chat_key: str, seen_title: object, marker: str, title: str
) -> tuple[tuple[str, str], str]:
    """A sealed chat's title decision, made on the client from the title it read (the script
    cannot read it; ``lua/redact_message.lua``'s ``seen_title`` refuses the call if it changed):
    the sealed marker to put ("" when there is no title or it is the marker already), "1" when
    the title is the one the message's text gives, and the title as read."""
    if seen_title is None:
        return ("", "0"), "="
    stored = field_text(seen_title, chat_key, "title")
    current = seal.open_title(stored, key=chat_key)
    replacement = "" if not marker or current == marker else seal.seal_title(marker)
    return (replacement, "1" if current == title else "0"), "=" + stored


def _record_parts(raw: bytes, key: str, position: int) -> Sequence[Any]:
    """The stored record as its msgpack array (read_record checked it already)."""
    parts = msgpack.unpackb(raw, raw=False, strict_map_key=False)
    if not isinstance(parts, list) or len(parts) not in (5, 6):
        raise CorruptionError(f"the record at {key} {position} is not a message record")
    return parts


def _parse(message_id: str, tokens: int, reply: Sequence[Any]) -> Redaction:
    done, dropped, pieces, before, moved, retitled, job, _enqueued, branch = reply
    return Redaction(
        message_id=message_id,
        redacted=bool(int(done)),
        summaries_dropped=int(dropped),
        stream_entries_removed=int(pieces),
        tokens_before=int(before) if int(done) else tokens,
        tokens_after=tokens,
        positions_recounted=int(moved),
        title_replaced=bool(int(retitled)),
        compaction_job=text(job) or None,
        branch=text(branch),
    )
