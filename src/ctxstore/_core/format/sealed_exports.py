"""Sealed exports: ``export_chat(..., sealed=True)`` (docs/encryption.md).

A sealed export is the portable form (:mod:`ctxstore._core.format.portable`) with the text of
each record sealed under the chat owner's data key, so a backup of it shares the chat's fate:
once ``erase_user`` destroys the key, no copy of the export opens. What stays in the clear is
what the chat itself keeps in the clear (ids, parents, times, token counts, branch and
checkpoint names, usage counters).

Which fields are sealed: the chat record's ``title``, ``metadata`` and ``counts`` (an export
cut short must not pass for a whole one), a message's ``message`` and ``metadata``, a summary's
``content`` and ``metadata`` (each in its JSON or its ``_msgpack`` form, exactly as a plain
export writes it). They are packed together and sealed as one value, in base64 under the
record's ``sealed``; the chat record's ``sealed`` also names what binds them: the namespace
and the incarnation of the exported chat, and the export's own id. The associated data is the
chat's (:class:`~ctxstore._core.format.sealed.ChatSeal`: namespace, chat id, incarnation with
the export's id) with a kind of its own (``x`` then the record's kind, so no exported value
opens as a stored one) and the message's place in the export (its position in write order and
its parent's; a summary, its message's): a value moved to another record, another export or
another chat does not open, and the import raises ``CorruptionError`` naming the record.

An import opens it with the owner's keys of the importing store's namespace, for that owner
only, so a sealed export is a backup of its namespace and its user (the plain export moves a
chat elsewhere, or to another user). A field in the clear beside the sealed value is refused.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from typing import Any

import msgpack

from ctxstore._core.format.sealed import ChatSeal, MissingDataKeyError, summary_kind
from ctxstore.errors import CorruptionError, KeyUnavailableError, ValidationError

#: The record field holding the sealed values (and, in the chat record, their binding).
SEALED = "sealed"
#: The fields sealed in each kind of record (either form of each value).
SEALED_FIELDS: dict[str, tuple[str, ...]] = {
    "chat": ("title", "metadata", "metadata_msgpack", "counts"),
    "message": ("message", "message_msgpack", "metadata", "metadata_msgpack"),
    "summary": ("content", "metadata", "metadata_msgpack"),
}
#: The kinds of the sealed values of a chat and a message record.
CHAT_KIND = b"xc"
MESSAGE_KIND = b"xm"


def summary_record_kind(message_id: str) -> bytes:
    """The kind of a summary record's sealed value: bound to the message it covers."""
    return b"x" + summary_kind(message_id)


def seal_record(
    seal: ChatSeal, record: dict[str, Any], kind: bytes, position: int, parent: int
) -> dict[str, Any]:
    """``record`` with its sealed fields replaced by one sealed value (see the module)."""
    names = SEALED_FIELDS[str(record["type"])]
    values = {name: record[name] for name in names if name in record}
    packed: bytes = msgpack.packb(values, use_bin_type=True)
    sealed = seal.keys_current_seal(kind, packed, position, parent)
    out = {name: value for name, value in record.items() if name not in values}
    out[SEALED] = base64.b64encode(sealed).decode("ascii")
    return out


#: The fields of a sealed export's chat record ``sealed``.
BINDING = ("namespace", "incarnation", "export", "values")


def export_place(incarnation: str, export: str) -> str:
    """What a sealed export's values are bound to beside the chat: its incarnation and the
    export's id (random: a value moved from another export of the same chat does not open), as
    one :class:`~ctxstore._core.format.sealed.ChatSeal` incarnation."""
    return f"{incarnation}.{export}"


def binding(record: Mapping[str, Any], where: str) -> tuple[str | None, str]:
    """(namespace, place) a sealed export's chat record names: what its values are bound to
    (the place: the chat's incarnation and the export's id, as one
    :class:`~ctxstore._core.format.sealed.ChatSeal` incarnation)."""
    bound = record.get(SEALED)
    if not isinstance(bound, Mapping) or set(bound) != set(BINDING):
        raise ValidationError(f"{where} sealed must name {', '.join(BINDING)}")
    namespace, incarnation, export = bound["namespace"], bound["incarnation"], bound["export"]
    if not (namespace is None or isinstance(namespace, str)) or not all(
        isinstance(part, str) and _BASE32.fullmatch(part) for part in (incarnation, export)
    ):
        raise ValidationError(f"{where} sealed names its namespace, incarnation and export")
    return namespace, export_place(incarnation, export)


_BASE32 = re.compile(r"[a-z2-7]{1,64}")


def opened_record(
    seal: ChatSeal,
    record: Mapping[str, Any],
    sealed: object,
    kind: bytes,
    position: int,
    parent: int,
    where: str,
) -> dict[str, Any]:
    """``record`` with the fields ``sealed`` (its base64 value) seals put back; a value that
    does not open there is ``CorruptionError`` naming ``where``, one sealed with a key the
    owner's keys do not hold ``KeyUnavailableError`` (an erased user's, or another
    namespace's)."""
    clear = sorted(set(record) & set(SEALED_FIELDS[str(record["type"])]))
    if clear:
        raise ValidationError(f"{where} holds {', '.join(clear)} in the clear, in a sealed export")
    if not isinstance(sealed, str):
        raise ValidationError(f"{where} sealed must be base64 text")
    try:
        raw = base64.b64decode(sealed.encode("ascii"), validate=True)
    except (UnicodeEncodeError, binascii.Error):
        raise ValidationError(f"{where} sealed must be base64 text") from None
    try:
        values = seal.open(kind, raw, position, parent, key=where)
    except MissingDataKeyError as missing:
        owner = seal.keys.user_id
        raise KeyUnavailableError(
            f"{where} of the sealed export is sealed with data key {missing.key_id!r} of user "
            f"{owner!r}, which this store does not hold (the user was erased, or the export is "
            "another namespace's)",
            subject=owner,
            key_id=missing.key_id,
        ) from None
    except CorruptionError as error:
        raise CorruptionError(
            f"{where} of the sealed export does not open where it stands (moved from another "
            "record, another export or another chat, or altered)",
            record=where,
            key_id=error.details.get("key_id"),
            reason="does not open where it stands",
        ) from None
    names = SEALED_FIELDS[str(record["type"])]
    if not set(values) <= set(names):
        raise CorruptionError(f"{where}: its sealed value holds fields of no such record")
    out = {name: value for name, value in record.items() if name != SEALED}
    out.update(values)
    return out
