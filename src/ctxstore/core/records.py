"""Turning raw script replies into models and message dicts.

Chat hash layout: plain fields (``user_id``, ``title``, ``created_at``, ``updated_at``,
``active_branch``, ``message_count``, ``branch_count``, sequence counters), one ``m:<key>`` field
per metadata key holding a msgpack value, and one ``u:<counter>`` field per usage counter.
Branch and checkpoint records are tab-separated text (Lua reads and writes them without cjson);
message records are decoded in :mod:`ctxstore.core.chain`.
"""

from __future__ import annotations

import gc
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ctxstore.core.codec import decode
from ctxstore.core.ids import check_key_id
from ctxstore.errors import CorruptionError, InvalidIdError

if TYPE_CHECKING:
    from ctxstore.models import BranchInfo, ChatInfo, ChatMeta, CheckpointInfo

METADATA_PREFIX = "m:"
USAGE_PREFIX = "u:"
USAGE_KEY = "usage"
#: The layout of the chats this version reads (the ``fmt`` field of the chat hash).
FORMAT = "2"

#: Counts and times as the scripts write them and HINCRBY reads them: no sign, no leading zero.
_COUNT = re.compile(r"0|[1-9][0-9]{0,15}")
#: The largest count a script keeps exactly (Lua numbers are doubles).
MAX_COUNT = 2**53
#: Numbers inside tab-separated records (the scripts read them with ``%d+``, at most 15 digits).
_RECORD_NUMBER = re.compile(r"[0-9]{1,15}")
_INCARNATION = re.compile(r"[a-z2-7]+")


def text(value: bytes | str) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else value


def corrupt(key: str, field: str | None, reason: str) -> CorruptionError:
    """The error for a malformed stored value, worded like the scripts' CORRUPT replies."""
    return CorruptionError(f"corrupt data at {key} field {field!r}: {reason}", key=key, field=field)


def field_text(raw: object, key: str, field: str) -> str:
    """A stored text value; bytes that are not UTF-8 (or no value at all) are corruption."""
    if isinstance(raw, str):
        return raw
    if isinstance(raw, bytes):
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise corrupt(key, field, "not UTF-8 text") from None
    raise corrupt(key, field, "missing" if raw is None else f"not text ({type(raw).__name__})")


def field_count(raw: object, key: str, field: str) -> int:
    """A stored count or time: what ``number_field`` accepts in the scripts (decimal digits
    without a sign or a leading zero, at most 2^53), or an integer reply."""
    if type(raw) is int and 0 <= raw <= MAX_COUNT:
        return raw
    if isinstance(raw, bytes):
        raw = raw.decode("ascii", "replace")
    if isinstance(raw, str) and _COUNT.fullmatch(raw) and int(raw) <= MAX_COUNT:
        return int(raw)
    raise corrupt(key, field, "missing" if raw is None else "not a non-negative integer")


def field_name(raw: bytes | str, key: str) -> str:
    """A hash field's name; one that is not UTF-8 is corruption (named as well as it can be)."""
    if isinstance(raw, str):
        return raw
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        shown = raw.decode("utf-8", "backslashreplace")
        raise CorruptionError(
            f"corrupt data at {key}: the field name {shown!r} is not UTF-8", key=key, field=shown
        ) from None


def pairs(reply: Sequence[Any] | Mapping[Any, Any], key: str = "") -> dict[str, Any]:
    """A hash reply (of ``key``) as a dict with text field names.

    Scripts return flat ``[field, value, ...]`` lists; redis-py turns a plain HGETALL into a
    dict itself. Both shapes are accepted so callers need not care which produced the reply.
    """
    if isinstance(reply, Mapping):
        return {field_name(field, key): value for field, value in reply.items()}
    return {field_name(reply[i], key): reply[i + 1] for i in range(0, len(reply), 2)}


def _int(fields: dict[str, Any], name: str, key: str) -> int:
    return field_count(fields.get(name), key, name)


# The model classes are imported where they are built, not with this module: the write path
# builds none, and `import ctxstore` must not load pydantic.


def chat_meta(chat_id: str, key: str, reply: Sequence[Any] | Mapping[Any, Any]) -> ChatMeta:
    from ctxstore.models import ChatMeta

    return ChatMeta(**_chat_fields(chat_id, key, pairs(reply, key)))


def chat_info(chat_id: str, key: str, reply: Sequence[Any] | Mapping[Any, Any]) -> ChatInfo:
    from ctxstore.models import ChatInfo

    fields = pairs(reply, key)
    return ChatInfo(
        **_chat_fields(chat_id, key, fields),
        message_count=_int(fields, "message_count", key),
        branch_count=_int(fields, "branch_count", key),
    )


def _chat_fields(chat_id: str, key: str, fields: dict[str, Any]) -> dict[str, Any]:
    """The fields every chat model holds, each checked: the identity first (as the scripts
    check it), then whatever the hash holds that a chat model parses."""
    return {
        "id": chat_id,
        **_identity(key, fields),
        "title": None if fields.get("title") is None else field_text(fields["title"], key, "title"),
        "metadata": _metadata(key, fields),
        "created_at": _int(fields, "created_at", key),
        "updated_at": _int(fields, "updated_at", key),
        "active_branch": field_text(fields.get("active_branch"), key, "active_branch"),
        "ttl": None if fields.get("ttl") is None else _int(fields, "ttl", key) / 1000,
    }


def _identity(key: str, fields: dict[str, Any]) -> dict[str, str]:
    """Owner and incarnation, with the format checked: what ``open_chat`` checks in the scripts
    (in the same order)."""
    check_format(fields.get("fmt"), key)
    return {
        "incarnation": check_incarnation(fields.get("inc"), key),
        "user_id": check_owner(fields.get("user_id"), key),
    }


def check_owner(raw: object, key: str) -> str:
    """A chat's ``user_id``: an id ctxstore accepts (it names the owner's index key)."""
    owner = field_text(raw, key, "user_id")
    try:
        return check_key_id(owner, "user_id")
    except InvalidIdError:
        raise corrupt(key, "user_id", "not a user id") from None


def check_format(raw: object, key: str) -> None:
    """A chat's ``fmt``: the layout this version reads."""
    if raw is None or field_text(raw, key, "fmt") != FORMAT:
        raise corrupt(key, "fmt", f"not written by this version of ctxstore (format {FORMAT})")


def check_incarnation(raw: object, key: str) -> str:
    """A chat's ``inc``: the lowercase base32 text ctxstore generates."""
    incarnation = field_text(raw, key, "inc")
    if not _INCARNATION.fullmatch(incarnation):
        raise corrupt(key, "inc", "not an incarnation")
    return incarnation


def _metadata(key: str, fields: dict[str, Any]) -> dict[str, Any]:
    metadata: dict[str, Any] = {}
    usage: dict[str, int] = {}
    for name, raw in fields.items():
        if name.startswith(METADATA_PREFIX):
            metadata[name[len(METADATA_PREFIX) :]] = decode(raw, key=key, field=name)
        elif name.startswith(USAGE_PREFIX):
            usage[name[len(USAGE_PREFIX) :]] = field_count(raw, key, name)
    if usage:
        metadata[USAGE_KEY] = usage
    return metadata


def _tab_fields(raw: object, key: str, field: str, count: int, what: str) -> list[str]:
    try:
        parts = field_text(raw, key, field).split("\t")
    except CorruptionError:
        parts = []
    if len(parts) != count:
        raise _not_a_record(key, field, what)
    return parts


def _not_a_record(key: str, field: str, what: str) -> CorruptionError:
    return CorruptionError(
        f"corrupt data at {key} field {field!r}: not a {what} record ctxstore writes",
        key=key,
        field=field,
    )


def _record_number(part: str, key: str, field: str, what: str) -> int:
    if not _RECORD_NUMBER.fullmatch(part):
        raise _not_a_record(key, field, what)
    return int(part)


@dataclass(frozen=True)
class BranchRecord:
    """A decoded branch record: its head (position and id), creation time and sequence, and the
    length of its chain."""

    position: int
    head: str | None
    created_at: int
    seq: int
    length: int


def branch_record(name: str, raw: object, key: str) -> BranchRecord:
    """``<head position>\t<head id>\t<created_at>\t<seq>\t<chain length>`` (position -1, an
    empty id and length 0 for an empty branch): tab-separated, so neither Lua nor Python needs
    JSON for it. Checked as ``parse_branch`` checks it in the scripts."""
    position, head, created_at, seq, length = _tab_fields(raw, key, name, 5, "branch")
    at = -1 if position == "-1" else _record_number(position, key, name, "branch")
    chain = _record_number(length, key, name, "branch")
    if (at == -1 and head != "") or (at == -1) != (chain == 0):
        raise _not_a_record(key, name, "branch")
    return BranchRecord(
        at,
        head or None,
        _record_number(created_at, key, name, "branch"),
        _record_number(seq, key, name, "branch"),
        chain,
    )


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


def branch_info(name: str, raw: object, *, active: str, key: str) -> tuple[BranchInfo, int]:
    """The branch model and its creation sequence number (for ordering)."""
    record = branch_record(name, raw, key)
    return to_branch_info(name, record, active=active), record.seq


def checkpoint_record(name: str, raw: object, key: str) -> tuple[int, str, int, int]:
    """``<position>\t<message id>\t<created_at>\t<seq>``: (position, message id, created_at,
    seq), checked as ``parse_checkpoint`` checks it in the scripts."""
    position, message_id, created_at, seq = _tab_fields(raw, key, name, 4, "checkpoint")
    if not message_id:
        raise _not_a_record(key, name, "checkpoint")
    return (
        _record_number(position, key, name, "checkpoint"),
        message_id,
        _record_number(created_at, key, name, "checkpoint"),
        _record_number(seq, key, name, "checkpoint"),
    )


def checkpoint_info(name: str, raw: object, key: str) -> tuple[CheckpointInfo, int]:
    """The checkpoint model and its sequence number (for newest-first ordering)."""
    from ctxstore.models import CheckpointInfo

    _position, message_id, created_at, seq = checkpoint_record(name, raw, key)
    info = CheckpointInfo.model_construct(name=name, message_id=message_id, created_at=created_at)
    return info, seq


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
