"""Branch and checkpoint records: the tab-separated pointers of the ``branch`` and
``checkpoint`` hashes (Lua reads and writes them without cjson).

A branch record is ``<head position>\t<head id>\t<created_at>\t<seq>\t<chain length>``
(position -1, an empty id and length 0 for an empty branch); a checkpoint record is
``<position>\t<message id>\t<created_at>\t<seq>``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ctxstore._core.format.fields import field_text, text
from ctxstore.errors import CorruptionError
from ctxstore.models import BranchInfo, CheckpointInfo

#: Numbers inside tab-separated records (the scripts read them with ``%d+``, at most 15 digits).
_RECORD_NUMBER = re.compile(r"[0-9]{1,15}")
#: The largest number a record holds (times, sequence numbers, positions, lengths).
MAX_RECORD_NUMBER = 10**15 - 1


def loose_fields(raw: Any, count: int, numbers: tuple[int, ...]) -> list[Any] | None:
    """A record's ``count`` tab-separated fields, the ``numbers`` ones as ints; None when it
    has not that shape. Lenient where :func:`branch_record` and :func:`checkpoint_record` are
    strict: verify reads with it what a strict reader refuses, to say what is wrong and
    rebuild what the log determines."""
    try:
        parts: list[Any] = text(raw).split("\t")
        if len(parts) != count:
            return None
        for index in numbers:
            parts[index] = int(parts[index])
    except (UnicodeDecodeError, ValueError, AttributeError):
        return None
    return parts


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


def branch_text(record: BranchRecord) -> str:
    """The stored form of a branch record (what :func:`branch_record` reads back)."""
    return (
        f"{record.position}\t{record.head or ''}\t{record.created_at}\t{record.seq}"
        f"\t{record.length}"
    )


def to_branch_info(name: str, record: BranchRecord, *, active: str) -> BranchInfo:
    """The branch as the API returns it: every field was typed by :func:`branch_record`,
    and this runs on every read."""
    return BranchInfo(
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


def checkpoint_text(position: int, message_id: str, created_at: int, seq: int) -> str:
    """The stored form of a checkpoint record (what :func:`checkpoint_record` reads back)."""
    return f"{position}\t{message_id}\t{created_at}\t{seq}"


def checkpoint_info(name: str, raw: object, key: str) -> tuple[CheckpointInfo, int]:
    """The checkpoint model and its sequence number (for newest-first ordering)."""
    _position, message_id, created_at, seq = checkpoint_record(name, raw, key)
    info = CheckpointInfo(name=name, message_id=message_id, created_at=created_at)
    return info, seq
