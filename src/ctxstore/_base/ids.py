"""Validation of ids and names: what a valid chat id, user id, name or key prefix is.

Ids that become part of a Redis key (chat ids, user ids) must not break out of their hash tag:
a ``{`` or ``}`` would move the key to another slot (breaking Cluster) or let one id address
another chat's keys. We refuse those characters rather than escape them: an escaped id would be
stored in a form the caller never wrote, and every other tool reading the keyspace would have to
know the escaping. Control characters (C0, DEL and C1, newlines and NUL included) are refused
everywhere: they are almost always a bug upstream and they corrupt logs and error replies. So
are lone surrogates, which no UTF-8 encoder writes.
"""

from __future__ import annotations

import re

from ctxstore.errors import InvalidIdError

#: Longest id or name, in UTF-8 bytes. Ids are copied into keys, hash fields and replies.
MAX_ID_BYTES = 256

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_TAG_BREAKERS = re.compile(r"[{}]")
#: Characters that would turn a prefix into an ACL key *pattern* or move keys to another slot.
_PREFIX_FORBIDDEN = re.compile(r"[{}*?\[\]\\\s]")


#: Names that passed :func:`check_name` lately: a worker checks the same few (its chats, "main",
#: head ids) on every call, and the check is a regex and an encode.
_CHECKED: set[str] = set()
_CHECKED_KEPT = 4096


def check_name(value: object, what: str) -> str:
    """A message id, branch or checkpoint name, metadata key: a hash field, never part of a key."""
    if type(value) is str and value in _CHECKED:
        return value
    if not isinstance(value, str):
        raise InvalidIdError(f"{what} must be a string, got {type(value).__name__}", what=what)
    if not value:
        raise InvalidIdError(f"{what} must not be empty", what=what)
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidIdError(
            f"{what} is not valid Unicode (a lone surrogate): {value!r}", what=what
        ) from None
    if size > MAX_ID_BYTES:
        raise InvalidIdError(
            f"{what} is longer than {MAX_ID_BYTES} bytes (UTF-8)", what=what, value=value[:64]
        )
    if _CONTROL.search(value):
        raise InvalidIdError(f"{what} must not contain control characters: {value!r}", what=what)
    if len(_CHECKED) >= _CHECKED_KEPT:
        _CHECKED.clear()
    _CHECKED.add(value)
    return value


def check_key_id(value: object, what: str) -> str:
    """A chat or user id, which becomes the hash tag of Redis keys."""
    checked = check_name(value, what)
    if _TAG_BREAKERS.search(checked):
        raise InvalidIdError(
            f"{what} must not contain '{{' or '}}' (it becomes a Redis hash tag): {checked!r}",
            what=what,
        )
    return checked


def check_key_prefix(value: object, what: str, *, allow_colon: bool) -> str:
    """The key prefix or tenant namespace: plain, so ``<prefix>:<namespace>:*`` is an ACL pattern.

    A namespace may not contain ``:``: tenant ``a`` would otherwise match tenant ``a:b``'s keys
    with its ``ctx:a:*`` pattern.
    """
    checked = check_name(value, what)
    if _PREFIX_FORBIDDEN.search(checked) or (not allow_colon and ":" in checked):
        banned = "{ } * ? [ ] \\" + ("" if allow_colon else " :")
        raise InvalidIdError(
            f"{what} must not contain whitespace or any of {banned}: {checked!r}", what=what
        )
    return checked
