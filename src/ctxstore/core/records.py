"""Turning raw script replies into models and message dicts.

Chat hash layout: plain fields (``user_id``, ``title``, ``created_at``, ``updated_at``,
``active_branch``, ``message_count``, ``branch_count``, sequence counters), one ``m:<key>`` field
per metadata key holding a msgpack value, and one ``u:<counter>`` field per usage counter.
Branch and checkpoint records are tab-separated text (Lua reads and writes them without cjson);
message records are decoded in :mod:`ctxstore.core.chain`.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ctxstore.core.codec import decode
from ctxstore.errors import CorruptionError

if TYPE_CHECKING:
    from ctxstore.models import BranchInfo, ChatInfo, ChatMeta, CheckpointInfo

METADATA_PREFIX = "m:"
USAGE_PREFIX = "u:"
USAGE_KEY = "usage"


def text(value: bytes | str) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else value


def pairs(reply: Sequence[Any] | Mapping[Any, Any]) -> dict[str, Any]:
    """A hash reply as a dict with text field names.

    Scripts return flat ``[field, value, ...]`` lists; redis-py turns a plain HGETALL into a
    dict itself. Both shapes are accepted so callers need not care which produced the reply.
    """
    if isinstance(reply, Mapping):
        return {text(field): value for field, value in reply.items()}
    return {text(reply[i]): reply[i + 1] for i in range(0, len(reply), 2)}


def _int(fields: dict[str, Any], name: str, key: str) -> int:
    try:
        return int(fields[name])
    except (KeyError, ValueError, TypeError) as exc:
        raise CorruptionError(
            f"chat hash {key} has no integer {name!r}", key=key, field=name
        ) from exc


# The model classes are imported where they are built, not with this module: the write path
# builds none, and `import ctxstore` must not load pydantic.


def chat_meta(chat_id: str, key: str, reply: Sequence[Any] | Mapping[Any, Any]) -> ChatMeta:
    from ctxstore.models import ChatMeta

    return ChatMeta(**_chat_fields(chat_id, key, pairs(reply)))


def chat_info(chat_id: str, key: str, reply: Sequence[Any] | Mapping[Any, Any]) -> ChatInfo:
    from ctxstore.models import ChatInfo

    fields = pairs(reply)
    return ChatInfo(
        **_chat_fields(chat_id, key, fields),
        message_count=_int(fields, "message_count", key),
        branch_count=_int(fields, "branch_count", key),
    )


def _chat_fields(chat_id: str, key: str, fields: dict[str, Any]) -> dict[str, Any]:
    metadata: dict[str, Any] = {}
    usage: dict[str, int] = {}
    for name, raw in fields.items():
        if name.startswith(METADATA_PREFIX):
            metadata[name[len(METADATA_PREFIX) :]] = decode(raw, key=key, field=name)
        elif name.startswith(USAGE_PREFIX):
            usage[name[len(USAGE_PREFIX) :]] = int(raw)
    if usage:
        metadata[USAGE_KEY] = usage
    if "user_id" not in fields:
        raise CorruptionError(f"chat hash {key} has no owner", key=key, field="user_id")
    title = fields.get("title")
    return {
        "id": chat_id,
        "user_id": text(fields["user_id"]),
        "title": None if title is None else text(title),
        "metadata": metadata,
        "created_at": _int(fields, "created_at", key),
        "updated_at": _int(fields, "updated_at", key),
        "active_branch": text(fields.get("active_branch", b"main")),
        "incarnation": text(fields.get("inc", b"")),
    }


def _tab_fields(raw: bytes | str, key: str, field: str, count: int, what: str) -> list[str]:
    try:
        parts = text(raw).split("\t")
    except UnicodeDecodeError:
        parts = []
    if len(parts) != count:
        raise CorruptionError(
            f"the {what} record at {key} field {field!r} is not one ctxstore writes",
            key=key,
            field=field,
        )
    return parts


@dataclass(frozen=True)
class BranchRecord:
    """A decoded branch record: its head (position and id), creation time and sequence, and the
    length of its chain."""

    position: int
    head: str | None
    created_at: int
    seq: int
    length: int


def branch_record(name: str, raw: bytes | str, key: str) -> BranchRecord:
    """``<head position>\t<head id>\t<created_at>\t<seq>\t<chain length>`` (position -1 and an
    empty id for an empty branch): tab-separated, so neither Lua nor Python needs JSON for it."""
    position, head, created_at, seq, length = _tab_fields(raw, key, name, 5, "branch")
    try:
        return BranchRecord(int(position), head or None, int(created_at), int(seq), int(length))
    except ValueError as exc:
        raise CorruptionError(
            f"the branch record at {key} field {name!r} holds a non-number", key=key, field=name
        ) from exc


def to_branch_info(name: str, record: BranchRecord, *, active: str) -> BranchInfo:
    """The model, built without validation: every field was typed by :func:`branch_record`,
    and this runs on every read."""
    from ctxstore.models import BranchInfo

    return BranchInfo.model_construct(
        name=name,
        head_message_id=record.head,
        is_active=name == active,
        message_count=record.length,
        created_at=record.created_at,
    )


def branch_info(name: str, raw: bytes | str, *, active: str, key: str) -> tuple[BranchInfo, int]:
    """The branch model and its creation sequence number (for ordering)."""
    record = branch_record(name, raw, key)
    return to_branch_info(name, record, active=active), record.seq


def checkpoint_info(name: str, raw: bytes | str, key: str) -> tuple[CheckpointInfo, int]:
    """The checkpoint model and its sequence number (for newest-first ordering)."""
    from ctxstore.models import CheckpointInfo

    _position, message_id, created_at, seq = _tab_fields(raw, key, name, 4, "checkpoint")
    try:
        info = CheckpointInfo(name=name, message_id=message_id, created_at=int(created_at))
        return info, int(seq)
    except ValueError as exc:
        raise CorruptionError(
            f"the checkpoint record at {key} field {name!r} holds a non-number",
            key=key,
            field=name,
        ) from exc


@contextmanager
def gc_paused(pause: bool = True) -> Iterator[None]:
    """The cyclic garbage collector off while a long chain is decoded.

    Decoding allocates a few dicts per message, all of them acyclic and kept; left running, the
    cyclic collector walks that growing heap again and again (a 10,000-message read saw its
    median go from 34 to 44 ms and its p99 from 38 to 67 ms).
    """
    was_enabled = gc.isenabled()
    if pause and was_enabled:
        gc.disable()
    try:
        yield
    finally:
        if pause and was_enabled:
            gc.enable()
