"""Generation of ids: request ids, message tags, chat incarnations (their validation is
:mod:`ctxstore._base.ids`)."""

from __future__ import annotations

import base64
import os

from ctxstore._core.format.records import TAG_LENGTH


def new_request_id() -> str:
    """A write's request id: a resent call carries the same one and is recognized by it."""
    return base64.urlsafe_b64encode(os.urandom(12)).decode("ascii")


def new_tags(count: int) -> list[str]:
    """A random tag per new message: the tail of its generated id. A position can be reused
    when Redis loses acknowledged writes; a tag makes sure its id is not."""
    letters = base64.b32encode(os.urandom(4 * count)).decode("ascii").lower()
    return [letters[TAG_LENGTH * i : TAG_LENGTH * (i + 1)] for i in range(count)]


def new_incarnation() -> str:
    """A chat's incarnation: 13 lowercase base32 characters (64 random bits), the tail of every
    generated message id of that chat (``<position>.<incarnation>``)."""
    return base64.b32encode(os.urandom(8)).decode("ascii").rstrip("=").lower()
