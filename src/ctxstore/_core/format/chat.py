"""The chat hash: one per chat, its identity, times, counters, markers, metadata and usage.

Plain fields: ``user_id`` (the owner), ``fmt`` (the layout,
:data:`~ctxstore._core.format.versions.FORMAT`), ``inc`` (the
incarnation), ``title``, ``created_at``, ``updated_at``, ``active_branch``, ``message_count``,
``branch_count``, sequence counters, ``ttl`` (the retention, ms), the ``cjob`` / ``clease`` /
``turn`` markers of compaction jobs and leases; then one ``m:<key>`` field per metadata key
(a msgpack value) and one ``u:<counter>`` field per usage counter. :func:`chat_meta` and
:func:`chat_info` read it into the API's models, checking each field as the scripts do.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ctxstore._base.ids import check_key_id
from ctxstore._core.format.codec import decode
from ctxstore._core.format.fields import corrupt, field_count, field_text, pairs
from ctxstore._core.format.sealed import ChatSeal
from ctxstore._core.format.versions import FORMATS_READ, chat_format_error, is_format_number
from ctxstore.errors import InvalidIdError
from ctxstore.models import ChatInfo, ChatMeta

METADATA_PREFIX = "m:"
USAGE_PREFIX = "u:"
USAGE_KEY = "usage"

_INCARNATION = re.compile(r"[a-z2-7]+")


def _int(fields: dict[str, Any], name: str, key: str) -> int:
    return field_count(fields.get(name), key, name)


# The model classes are imported where they are built, not with this module: the write path
# builds none, and `import ctxstore` must not load pydantic.


class Hidden:
    """What a chat hash is read with when only its identity, times and counts are wanted (a
    write's reply, before its values are opened): its title and metadata values are left out
    (None, and absent keys)."""


#: The one :class:`Hidden`.
HIDDEN = Hidden()

#: How a chat's title and metadata values are read: in the clear (None), opened with the
#: chat's seal, or left out (:data:`HIDDEN`).
ChatValues = ChatSeal | Hidden | None


def chat_meta(
    chat_id: str,
    key: str,
    reply: Sequence[Any] | Mapping[Any, Any],
    values: ChatValues = None,
) -> ChatMeta:
    return ChatMeta(**_chat_fields(chat_id, key, pairs(reply, key), values))


def chat_info(
    chat_id: str,
    key: str,
    reply: Sequence[Any] | Mapping[Any, Any],
    values: ChatValues = None,
) -> ChatInfo:
    fields = pairs(reply, key)
    return ChatInfo(
        **_chat_fields(chat_id, key, fields, values),
        message_count=_int(fields, "message_count", key),
        branch_count=_int(fields, "branch_count", key),
    )


def _chat_fields(
    chat_id: str, key: str, fields: dict[str, Any], values: ChatValues
) -> dict[str, Any]:
    """The fields every chat model holds, each checked: the identity first (as the scripts
    check it), then whatever the hash holds that a chat model parses."""
    return {
        "id": chat_id,
        **_identity(key, fields),
        "title": _title(key, fields.get("title"), values),
        "metadata": _metadata(key, fields, values),
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
    """A chat's ``fmt``: a format this release reads. Another release's format is a
    :class:`FormatError` (the data is intact); anything else is corruption."""
    found = None if raw is None else field_text(raw, key, "fmt")
    if found in FORMATS_READ:
        return
    if found is not None and is_format_number(found):
        raise chat_format_error(found, chat_id=_chat_id_of(key))
    raise corrupt(key, "fmt", "not a storage format of ctxstore")


def _chat_id_of(key: str) -> str | None:
    """The chat id in a chat key's hash tag (``<base>:{<chat>}:chat``), for a message."""
    start, end = key.find("{"), key.find("}")
    return key[start + 1 : end] if 0 <= start < end else None


def check_incarnation(raw: object, key: str) -> str:
    """A chat's ``inc``: the lowercase base32 text ctxstore generates."""
    incarnation = field_text(raw, key, "inc")
    if not _INCARNATION.fullmatch(incarnation):
        raise corrupt(key, "inc", "not an incarnation")
    return incarnation


def _title(key: str, raw: object, values: ChatValues) -> str | None:
    if raw is None:
        return None
    text = field_text(raw, key, "title")
    if isinstance(values, ChatSeal):
        return values.open_title(text, key=key)
    return None if values is HIDDEN else text


def metadata_and_usage(
    key: str, fields: Mapping[str, Any], values: ChatValues = None
) -> tuple[dict[str, Any], dict[str, int]]:
    """The chat's metadata (its ``m:<key>`` fields, decoded, and opened with a sealed chat's
    seal) and usage counters (its ``u:<counter>`` fields), each checked."""
    metadata: dict[str, Any] = {}
    usage: dict[str, int] = {}
    for name, raw in fields.items():
        if name.startswith(METADATA_PREFIX):
            value = decode(raw, key=key, field=name)
            if values is HIDDEN:
                continue
            metadata_key = name[len(METADATA_PREFIX) :]
            if isinstance(values, ChatSeal):
                value = values.open_metadata(metadata_key, value, key=key)
            metadata[metadata_key] = value
        elif name.startswith(USAGE_PREFIX):
            usage[name[len(USAGE_PREFIX) :]] = field_count(raw, key, name)
    # In key order: a hash keeps its fields in insertion order only while it is small (a
    # sealed chat's longer values outgrow that sooner), and a read, an export, is the same
    # each time.
    return dict(sorted(metadata.items())), dict(sorted(usage.items()))


def has_sealed_values(fields: Mapping[str, Any]) -> bool:
    """Whether a sealed chat's hash holds a value to open (a title, a metadata value): a read
    of one without needs none of its owner's keys."""
    return "title" in fields or any(name.startswith(METADATA_PREFIX) for name in fields)


def _metadata(key: str, fields: dict[str, Any], values: ChatValues) -> dict[str, Any]:
    """The metadata a chat model shows: the usage counters under ``"usage"``."""
    metadata, usage = metadata_and_usage(key, fields, values)
    if usage:
        metadata[USAGE_KEY] = usage
    return metadata


#: Slots of a chat's request ring (``lua/lib/requests.lua``): ``req_slot`` is the next one.
REQUEST_RING = 32


def _request_slot(raw: Any, key: str, name: str) -> int:
    slot = field_count(raw, key, name)
    if slot >= REQUEST_RING:
        raise corrupt(key, name, "not a slot of the request ring")
    return slot


#: Fields of the chat hash besides the identity (``user_id``, ``fmt``, ``inc``), the counters
#: (``message_count``, ``branch_count``: checked against the records) and ``updated_at``: how
#: each is checked when present.
_FIELD_CHECKS: dict[str, Callable[[Any, str, str], Any]] = {
    "created_at": field_count,
    "branch_seq": field_count,
    "checkpoint_seq": field_count,
    "req_since": field_count,  # written by releases before the request ring; still checked
    "req_slot": _request_slot,
    "rgen": field_count,  # how many redactions the chat had (what cached chains are read from)
    "title": field_text,
    "active_branch": field_text,
}
#: The compaction job marker (``lua/append.lua``: ``<summary position>\t<now>``) and the
#: compaction lease (``compaction_lease.lua``: ``<token>\t<expires>``).
_MARKERS = {"cjob": re.compile(r"-?[0-9]+\t[0-9]+"), "clease": re.compile(r"[^\t]*\t[0-9]+")}


def check_chat_field(name: str, raw: Any, key: str) -> None:
    """Check one field of the chat hash that a reader or a script parses (counts, text,
    metadata, usage counters, markers); a ``CorruptionError`` when it is not what ctxstore
    writes. Fields this function does not know are left alone."""
    if name in _FIELD_CHECKS:
        _FIELD_CHECKS[name](raw, key, name)
    elif name.startswith(METADATA_PREFIX):
        decode(raw, key=key, field=name)
    elif name.startswith(USAGE_PREFIX):
        field_count(raw, key, name)
    elif name in _MARKERS:
        shown = raw if isinstance(raw, str) else bytes(raw).decode("utf-8", "backslashreplace")
        if not _MARKERS[name].fullmatch(shown):
            raise corrupt(key, name, "not a marker ctxstore writes")
