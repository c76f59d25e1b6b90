"""Stored values as the scripts write them: text, counts and times, hash field names, and the
corruption error for anything else. Every reader of a hash field goes through these, so what
Python accepts is exactly what the scripts' checks (``lib/checks.lua``) accept."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from ctxstore.errors import CorruptionError

#: Counts and times as the scripts write them and HINCRBY reads them: no sign, no leading zero.
_COUNT = re.compile(r"0|[1-9][0-9]{0,15}")
#: The largest count a script keeps exactly (Lua numbers are doubles).
MAX_COUNT = 2**53


def text(value: bytes | str) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else value


def corrupt(key: str, field: str | None, reason: str) -> CorruptionError:
    """The error for a malformed stored value, worded like the scripts' CORRUPT replies."""
    return CorruptionError(
        f"corrupt data at {key} field {field!r}: {reason}", key=key, field=field, reason=reason
    )


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


def scored_pairs(reply: Sequence[Any] | None) -> list[tuple[Any, Any]]:
    """A ``WITHSCORES`` reply as (member, score) pairs: flat in RESP2, already paired in RESP3
    and when redis-py's own reply callback paired it."""
    items = list(reply or ())
    if items and isinstance(items[0], (list, tuple)):
        return [(item[0], item[1]) for item in items]
    return [(items[i], items[i + 1]) for i in range(0, len(items), 2)]


def pairs(reply: Sequence[Any] | Mapping[Any, Any], key: str = "") -> dict[str, Any]:
    """A hash reply (of ``key``) as a dict with text field names.

    Scripts return flat ``[field, value, ...]`` lists; redis-py turns a plain HGETALL into a
    dict itself. Both shapes are accepted so callers need not care which produced the reply.
    """
    if isinstance(reply, Mapping):
        return {field_name(field, key): value for field, value in reply.items()}
    return {field_name(reply[i], key): reply[i + 1] for i in range(0, len(reply), 2)}
