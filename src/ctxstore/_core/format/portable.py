"""The portable form of a chat: the records ``export_chat`` yields and ``import_chat`` takes.

A chat travels as a sequence of JSON objects, each with a ``type``, written one a line as JSON
Lines (:func:`dumps_line`, :func:`loads_line`):

* ``chat`` (first, with the format ``version``): id, owner, title, times, retention
  (``ttl_ms``), metadata, usage counters, and how many records of each kind follow (an export
  cut short is refused on import instead of becoming a smaller chat);
* ``message``, in the chat's write order (parents before children): id, parent id,
  ``created_at``, the tokens stored for it at save, the payload as stored and, when it has
  some, its metadata;
* ``branch`` (in creation order: its head, time, whether it is the active one),
  ``checkpoint`` (creation order) and ``summary`` (by the position of its message: text,
  metadata, tokens).

Values are kept exactly. A payload or metadata value that JSON holds exactly (dicts with text
keys, lists, text, integers, finite floats, booleans, null, nested at most
:data:`MAX_JSON_DEPTH` deep) is written as JSON; any other (bytes, non-text keys, NaN) is
written as its msgpack bytes in base64 under the same name with ``_msgpack`` appended
(``message_msgpack``), so an import stores the very bytes the export read.

Token counts are carried, not recounted: they are what the writer's tokenizer said at save, an
importing store may count with another one, and a chat whose windows and sizes changed on import
would not read back as it was.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Mapping
from typing import Any

import msgpack

from ctxstore._core.format.codec import decode
from ctxstore.errors import ValidationError

#: The format version the first record carries; an import refuses any other.
FORMAT_VERSION = 1
#: The suffix of a value written as base64 msgpack instead of JSON.
MSGPACK_SUFFIX = "_msgpack"
#: Deeper values go as msgpack: JSON encoders and decoders recurse, and stop near 1,000 levels.
MAX_JSON_DEPTH = 100
#: Characters that JSON leaves raw but that some line splitters (Python's ``str.splitlines``)
#: treat as line ends: escaped, so every record is exactly one line for any reader.
_LINE_BREAKERS = str.maketrans({"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"})


def json_exact(value: Any) -> bool:
    """Whether ``value`` (as decoded from msgpack) reads back from JSON as the same msgpack."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        kind = type(item)
        if kind is str or kind is int or kind is bool or item is None:
            continue
        if kind is float:
            if not math.isfinite(item):
                return False
            continue
        if depth >= MAX_JSON_DEPTH:
            return False
        if kind is list:
            stack.extend((child, depth + 1) for child in item)
        elif kind is dict:
            for key, child in item.items():
                if type(key) is not str:
                    return False
                stack.append((child, depth + 1))
        else:
            return False
    return True


def put_value(record: dict[str, Any], name: str, value: Any) -> None:
    """``record[name] = value`` when JSON holds it exactly, else its msgpack in base64 under
    ``name + "_msgpack"``."""
    if json_exact(value):
        record[name] = value
    else:
        packed = msgpack.packb(value, use_bin_type=True)
        record[name + MSGPACK_SUFFIX] = base64.b64encode(packed).decode("ascii")


def take_value(record: Mapping[str, Any], name: str, where: str, *, required: bool) -> Any:
    """The value :func:`put_value` wrote (``missing`` when neither form is there and it is
    optional); both forms at once, or base64 that is not msgpack, is a ValidationError."""
    packed_name = name + MSGPACK_SUFFIX
    if name in record and packed_name in record:
        raise ValidationError(f"{where} has both {name!r} and {packed_name!r}")
    if name in record:
        return record[name]
    if packed_name not in record:
        if required:
            raise ValidationError(f"{where} has no {name!r}")
        return MISSING
    text = record[packed_name]
    if not isinstance(text, str):
        raise ValidationError(f"{where} {packed_name!r} must be base64 text")
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError):
        raise ValidationError(f"{where} {packed_name!r} is not base64") from None
    try:
        return decode(raw, key=where, field=packed_name)
    except Exception as error:  # a CorruptionError naming the record: here it is bad input
        raise ValidationError(f"{where} {packed_name!r} is not a msgpack value") from error


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


#: What :func:`take_value` returns for an optional value that is not there.
MISSING: Any = _Missing()


def dumps_line(record: Mapping[str, Any]) -> str:
    """One record as one line of JSON Lines (with its newline): UTF-8 text, compact, keys in
    the record's order, so one chat always gives the same bytes."""
    text = json.dumps(record, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return text.translate(_LINE_BREAKERS) + "\n"


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def loads_line(line: bytes | str, number: int) -> Any:
    """The record on line ``number`` (1-based); a line that is not one JSON object is a
    ValidationError naming it."""
    try:
        text = line.decode("utf-8") if isinstance(line, bytes) else line
        value = json.loads(text, parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        raise ValidationError(f"record {number} is not a JSON object ({error})") from None
    if not isinstance(value, dict):
        raise ValidationError(f"record {number} is not a JSON object")
    return value
