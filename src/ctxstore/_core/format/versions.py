"""Storage formats: which one this release writes, which ones it reads, and what a process of
it says when it meets another.

The policy (docs/compatibility.md): release N reads chats of formats N-1 and N and writes the
format its keyspace is marked with; ``ctxstore migrate`` marks a keyspace N and upgrades its
chats once every process runs N. Format 2 is the first one kept, so this release reads format
2 only. A chat or a keyspace of a format this release does not read is a :class:`FormatError`
naming both formats (never a ``CorruptionError``: the data is intact, another release reads it).

The keyspace marker is a hash ``<base>:format``: ``format``, ``release`` (the release that set
it) and ``marked_at`` (epoch ms). A keyspace without one is format 2: every release from 0.2 on
wrote format 2 and none marked it.

The Lua scripts keep the same two constants in ``lua/lib/base.lua`` (a test checks they agree).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ctxstore._base.release import __version__
from ctxstore.errors import FormatError

#: The format this release writes (the ``fmt`` field of the chat hash).
FORMAT = "2"
#: The format of a chat whose values are sealed (docs/encryption.md): format 2's layout, with
#: message payloads and metadata as sealed values. A store with ``encryption=`` creates its
#: chats in it; a release that reads format 2 only refuses such a chat as a newer release's
#: (:class:`FormatError`), rather than writing plaintext into it.
SEALED_FORMAT = "3"
#: The formats this release reads: format 2 and its sealed twin.
FORMATS_READ = ("2", "3")
#: The format of a keyspace that carries no marker.
UNMARKED_FORMAT = "2"
#: How often a process reads its keyspace's marker again (seconds): after ``migrate`` marks a
#: keyspace, every process writes the new format within this long.
MARKER_RECHECK_SECONDS = 60.0

_FORMAT_NUMBER = re.compile(r"[1-9][0-9]{0,2}")


def release() -> str:
    """This release's version."""
    return __version__


def is_format_number(raw: str) -> bool:
    """Whether ``raw`` reads as a storage format (a small decimal number), ours or not."""
    return bool(_FORMAT_NUMBER.fullmatch(raw))


@dataclass(frozen=True)
class KeyspaceMarker:
    """A keyspace's marker: its format, the release that set it and when (None: unmarked)."""

    format: str
    release: str | None = None
    marked_at: int | None = None

    @property
    def marked(self) -> bool:
        return self.release is not None


def marker_from(fields: Mapping[str, Any]) -> KeyspaceMarker:
    """The marker an ``HGETALL`` of ``<base>:format`` read (decoded field names and values)."""
    if not fields:
        return KeyspaceMarker(UNMARKED_FORMAT)
    found = str(fields.get("format", ""))
    marked_at = str(fields.get("marked_at", ""))
    return KeyspaceMarker(
        found,
        release=str(fields.get("release", "")) or "unknown",
        marked_at=int(marked_at) if marked_at.isdigit() else None,
    )


def chat_format_error(
    found: str, *, chat_id: object = None, install: str | None = None
) -> FormatError:
    """What a process of this release says about a chat stored in format ``found``."""
    what = "a chat" if chat_id is None else f"chat {chat_id!r}"
    return FormatError(
        f"{what} is stored in format {found}, which ctxstore {release()} does not read (it "
        f"reads format {_listed(FORMATS_READ)}): {_advice(found, install)}",
        found=found,
        reads=FORMATS_READ,
        release=release(),
        install=install,
        chat_id=chat_id,
    )


def keyspace_format_error(marker: KeyspaceMarker, base: str) -> FormatError:
    """What a process of this release says about a keyspace marked with a format it cannot
    write (nothing is read or written through it)."""
    install = marker.release if marker.release not in (None, "unknown") else None
    return FormatError(
        f"the keyspace {base!r} is marked format {marker.format} (by ctxstore "
        f"{marker.release or 'unknown'}), which ctxstore {release()} does not write (it writes "
        f"format {FORMAT}): {_advice(marker.format, install)}",
        found=marker.format,
        reads=FORMATS_READ,
        release=release(),
        install=install,
    )


def check_writable(marker: KeyspaceMarker, base: str) -> None:
    """Refuse a keyspace whose format this release does not write."""
    if marker.format != FORMAT:
        raise keyspace_format_error(marker, base)


def _advice(found: str, install: str | None) -> str:
    newer = is_format_number(found) and int(found) > int(FORMAT)
    if newer and install:
        return f"a newer release wrote it; install ctxstore {install} or later"
    if newer:
        return "a newer release wrote it; install the release that marked the keyspace, or later"
    if is_format_number(found):
        return (
            f"an older release wrote it; migrate it with a release that reads formats {found} "
            f"and {int(found) + 1} first (docs/compatibility.md)"
        )
    return "it was not written by ctxstore"


def _listed(formats: tuple[str, ...]) -> str:
    return " and ".join(formats)
