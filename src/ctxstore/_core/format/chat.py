"""Turning raw script replies into models and message dicts.

Chat hash layout: plain fields (``user_id``, ``title``, ``created_at``, ``updated_at``,
``active_branch``, ``message_count``, ``branch_count``, sequence counters), one ``m:<key>`` field
per metadata key holding a msgpack value, and one ``u:<counter>`` field per usage counter.
Branch and checkpoint records are tab-separated text (Lua reads and writes them without cjson);
message records are decoded in :mod:`ctxstore.core.chain`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ctxstore._core.format.codec import decode
from ctxstore._core.ids import check_key_id
from ctxstore.errors import InvalidIdError

if TYPE_CHECKING:
    from ctxstore.models import ChatInfo, ChatMeta
from ctxstore._core.format.fields import corrupt, field_count, field_text, pairs

METADATA_PREFIX = "m:"
USAGE_PREFIX = "u:"
USAGE_KEY = "usage"
#: The layout of the chats this version reads (the ``fmt`` field of the chat hash).
FORMAT = "2"

_INCARNATION = re.compile(r"[a-z2-7]+")


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
