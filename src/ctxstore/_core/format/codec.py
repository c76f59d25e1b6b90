"""msgpack encoding of message records and metadata values.

Payloads are opaque bytes to Lua (the embedded store's Lua has no cmsgpack), so everything that
needs their content decodes them here. Encoding failures become
:class:`~ctxstore.errors.UnserializablePayloadError` naming the path of the offending value, and
decoding failures become :class:`~ctxstore.errors.CorruptionError` naming the key and field:
a raw decoder traceback would tell the caller nothing about where the bad data sits.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgpack

from ctxstore.errors import CorruptionError, PayloadTooLargeError, UnserializablePayloadError

_SCALARS = (str, bytes, bool, int, float, type(None))


def encode(
    value: Any, *, what: str, limit: int, payload: Any = None, strict: bool = False
) -> bytes:
    """msgpack bytes of ``value``; refuses values msgpack cannot encode and oversized results.

    ``payload`` is the caller's part of ``value`` (a record wraps it): error paths are given
    relative to it, in the caller's terms. ``strict``: the value is read back with
    :func:`decode` (chat metadata, summaries), so what it refuses (extension types) is refused
    here too.
    """
    try:
        packed: bytes = msgpack.packb(value, use_bin_type=True)
    except (TypeError, ValueError, OverflowError) as exc:
        path = _first_unencodable(value if payload is None else payload, what)
        raise UnserializablePayloadError(
            f"{path} cannot be stored: {exc}", what=what, path=path
        ) from exc
    try:
        if strict:
            _refuse_timestamps(
                msgpack.unpackb(packed, raw=False, strict_map_key=False, ext_hook=_no_extension)
            )
        else:
            msgpack.unpackb(packed, raw=False, strict_map_key=False)
    except Exception as exc:  # it would be stored, then no read could decode it
        path = _first_unencodable(value if payload is None else payload, what)
        raise UnserializablePayloadError(
            f"{path} cannot be stored: it would not read back ({exc})", what=what, path=path
        ) from exc
    if len(packed) > limit:
        raise PayloadTooLargeError(
            f"{what} is {len(packed)} bytes encoded, over the limit of {limit} bytes",
            what=what,
            size=len(packed),
            limit=limit,
        )
    return packed


def _no_extension(code: int, _data: bytes) -> Any:
    raise ValueError(f"an extension type ({code}), which ctxstore never writes")


def decode(raw: bytes, *, key: str, field: str) -> Any:
    """The value stored at ``key``/``field``; undecodable bytes are a corruption error. What
    is undecodable is what the scripts' ``mp_skip`` refuses too: bad msgpack, strings that are
    not UTF-8, lists or maps as map keys, extension types, more than 1,024 nested containers."""
    try:
        value = msgpack.unpackb(raw, raw=False, strict_map_key=False, ext_hook=_no_extension)
        _refuse_timestamps(value)
        return value
    except Exception as exc:  # msgpack raises several unrelated types for bad input
        raise CorruptionError(
            f"the record at {key} field {field!r} is not valid msgpack ({exc})",
            key=key,
            field=field,
        ) from exc


def _refuse_timestamps(value: Any) -> None:
    """msgpack decodes its timestamp extension itself, without the ext_hook."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, msgpack.Timestamp):
            raise ValueError("an extension type (-1, a timestamp), which ctxstore never writes")
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def _first_unencodable(value: Any, path: str) -> str:
    """Where in ``value`` msgpack gives up: ``message[0].content[1].when`` rather than 'a set'."""
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, int) and not isinstance(item, bool) and not -(2**63) <= item < 2**64:
            return f"{where} (an integer out of the 64-bit range)"
        if isinstance(item, _SCALARS):
            continue
        if isinstance(item, dict):
            for key, child in item.items():
                if not isinstance(key, (str, int, bytes, float, bool, type(None))):
                    return f"{where} (a key of type {type(key).__name__})"
                stack.append((child, f"{where}.{key!s}"))
        elif isinstance(item, (list, tuple)):
            stack.extend((child, f"{where}[{i}]") for i, child in enumerate(item))
        else:
            return f"{where} (a value of type {type(item).__name__})"
    return path


def plain_dict(value: Mapping[str, Any]) -> dict[str, Any]:
    """The mapping as a ``dict`` (msgpack takes dicts, not any Mapping); a dict is not copied."""
    return value if type(value) is dict else dict(value)
