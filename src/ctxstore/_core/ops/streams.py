"""Answer streams: an answer's text mirrored into Redis while the model streams it, so a reader
in another process (another web worker, a page reloaded) follows it live and resumes it by id.

Two keys per chat, under the chat's hash tag (so every script stays in one Cluster slot, and
``delete_chat`` removes them with the rest):

* ``stream`` - a Redis Stream holding the entries of all the chat's answer streams. An answer's
  stream id is ``"<id of its first entry>.<tag>"``; its entries are the first one ({t: tag}),
  pieces of text ({s: stream id, d: text}, one per write: the writer batches the model's
  deltas), and a last one: {s, e: message id} once the answer was saved, or {s, f: reason}.
* ``stream_state`` - a hash of one record per stream: incarnation, branch, state (``live``,
  ``done``, ``failed``), deadline, writes so far, and the message id or the reason.

A live stream's deadline is ``writer_ttl`` after its last write: a writer that died (a killed
worker) lets it pass, and readers then see the stream as stopped instead of waiting forever.
A closed stream stays readable ``stream_ttl`` after its end, exactly: readers refuse it after
its deadline. Both keys expire on their own (each write keeps them at least as long as its
deadline asks), so no retention or cleanup job is needed; the chat's retention is not moved by
them. Starting a stream drops the records past their deadline (and the oldest closed ones past
:data:`MAX_STREAMS`) and trims the entries older than the oldest stream kept.

Every write is safe to resend: a stream's start carries its tag (a resent start finds its own
record), each write its number (a resent write is recognized and skipped), and closing a stream
twice with the same outcome answers the same. The writes are not waited for with
``durability=``: the text is a live copy of an answer whose save (an append) is.

Reading (:func:`read_stream`) is a plan: a script returns the stream's pieces after a cursor
and where the stream stands; while it is live and nothing new is there, an ``XREAD BLOCK`` (at
most :data:`WAIT_MS`) waits for the next entry of the chat's stream, then the script reads again.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from ctxstore._base.ids import check_name
from ctxstore._base.plans import Emit, Plan, Run
from ctxstore._core.format.fields import corrupt, text
from ctxstore._core.format.sealed import ChatSeal
from ctxstore._core.ids import new_tags
from ctxstore._core.ops.chats import chat_context, keys_for, scope_args
from ctxstore._core.ops.data_keys import chat_owner, made_keys, owner_keys
from ctxstore._core.protocol import Operation, command_call, script_call
from ctxstore._core.scripts import load_script
from ctxstore._core.state import StoreState
from ctxstore.crypto.seal import is_sealed
from ctxstore.errors import (
    BackendTimeoutError,
    ConfigurationError,
    InvalidIdError,
    StreamFailedError,
    ValidationError,
)
from ctxstore.models import StreamPiece

#: How long a closed stream stays readable by default, in seconds.
DEFAULT_STREAM_TTL: Final = 3600.0
#: How long a live stream waits for its writer's next write by default, in seconds (a model
#: that thinks longer than this before its next delta should get a longer ``writer_ttl``).
DEFAULT_WRITER_TTL: Final = 120.0
#: The most answer streams a chat keeps at once (live ones, and closed ones not expired yet).
MAX_STREAMS: Final = 100
#: The most writes one stream takes.
MAX_WRITES: Final = 100_000
#: How many entries of the chat's stream one read looks at.
READ_COUNT: Final = 256
#: Reads in a row whose reply is late (BackendTimeoutError) before a reader gives up.
LATE_READS: Final = 3
#: The longest a reader blocks in one XREAD, in milliseconds (less when the client's socket
#: timeout is shorter: half of it).
WAIT_MS: Final = 1000

_STREAM_ID = re.compile(r"([0-9]{1,15})-([0-9]{1,15})\.[a-z2-7]{6}")
_ENTRY_ID = re.compile(r"([0-9]{1,20})-([0-9]{1,20})")


@dataclass(frozen=True, slots=True)
class _Read:
    """What one read script found: the stream's state, the last entry it looked at, the message
    id or reason, and the pieces."""

    state: str
    cursor: str
    detail: str
    pieces: tuple[StreamPiece, ...]
    #: The write number of the last sealed piece read (0: none yet, or pieces in the clear).
    last_write: int = 0


def check_stream_id(stream_id: object) -> tuple[int, int]:
    """A stream id as ``stream_turn`` hands it out; returns its first entry's id as numbers."""
    if not isinstance(stream_id, str):
        raise InvalidIdError(
            f"stream_id must be a string, got {type(stream_id).__name__}", what="stream_id"
        )
    match = _STREAM_ID.fullmatch(stream_id)
    if match is None:
        raise InvalidIdError(
            f"stream_id {stream_id[:64]!r} is not an answer stream id", what="stream_id"
        )
    return int(match.group(1)), int(match.group(2))


def check_entry_id(entry_id: object, what: str = "after") -> tuple[int, int]:
    """An entry id (``"<ms>-<seq>"``, what a :class:`StreamPiece` carries) as numbers."""
    match = _ENTRY_ID.fullmatch(entry_id) if isinstance(entry_id, str) else None
    if match is None:
        raise ValidationError(
            f"{what} must be the id of a stream piece ('<ms>-<seq>'), got {entry_id!r}",
            what=what,
        )
    return int(match.group(1)), int(match.group(2))


def _scripted(name: str, state: StoreState, chat_id: str) -> tuple[Any, tuple[str, ...]]:
    script = load_script(name)
    return script, keys_for(script, state.keyspace.chat(chat_id))


def begin_stream(
    state: StoreState,
    chat_id: str,
    branch: str,
    *,
    writer_ttl_ms: int,
    user_id: str | None = None,
    incarnation: str | None = None,
) -> Operation[str]:
    """Start a live stream for an answer on ``branch``; returns its stream id."""
    check_name(branch, "branch")
    script, keys = _scripted("stream_begin", state, chat_id)
    stream_id: str = yield script_call(
        script,
        keys,
        (
            *scope_args(user_id, incarnation),
            branch,
            new_tags(1)[0],
            state.clock(),
            writer_ttl_ms,
            MAX_STREAMS,
        ),
        parse=text,
        context=chat_context(chat_id),
        writes=False,  # a live copy of an answer; the answer's own save is what waits
    )
    return stream_id


def stream_kind(stream_id: str) -> bytes:
    """The kind of a stream piece's sealed value: a piece of that answer stream (its id is
    unique, so a piece copied to another stream or chat does not open)."""
    named = stream_id.encode("ascii")
    return b"d%d:%s" % (len(named), named)


def stream_seal(state: StoreState, chat_id: str, user_id: str | None) -> Operation[ChatSeal]:
    """What seals and opens a chat's stream pieces: its owner's keys, bound to the chat (the
    stream id binds the rest; no incarnation to learn for every piece)."""
    owner = yield from chat_owner(state, chat_id, user_id)
    keys = yield from owner_keys(state, owner)
    if keys.current is None:  # a sealed chat whose open stopped before making the key
        keys = yield from made_keys(state, chat_id, owner, user_id)
    return ChatSeal(keys, state.keyspace.namespace, chat_id, "")


def open_piece(seal: ChatSeal, stream_id: str, raw: Any, key: str, entry: str) -> tuple[int, str]:
    """The write number and text of a sealed piece: ``"<write>:"`` then its sealed value,
    bound to its stream and its write number."""
    stored = bytes(raw) if not isinstance(raw, bytes) else raw
    number, colon, sealed = stored.partition(b":")
    if not colon or not number.isdigit():
        raise corrupt(key, entry, "a piece that is not sealed, in a chat whose pieces are")
    return int(number), seal.open_text(
        stream_kind(stream_id), sealed, int(number), key=key, field=entry
    )


def write_stream(
    state: StoreState,
    chat_id: str,
    stream_id: str,
    number: int,
    piece: str,
    *,
    writer_ttl_ms: int,
    user_id: str | None = None,
    incarnation: str | None = None,
) -> Operation[bool]:
    """Add ``piece`` as the stream's write number ``number`` (1, 2, ...) and keep it live;
    False when this write was applied already (a resend)."""
    script, keys = _scripted("stream_write", state, chat_id)
    if len(piece) > state.limits.max_message_bytes:  # characters: a bound, not a size
        raise ValidationError(
            f"a piece of {len(piece)} characters is over the limit of "
            f"{state.limits.max_message_bytes}"
        )
    text_arg: str | bytes = piece
    if state.settings.encryption is not None:
        seal = yield from stream_seal(state, chat_id, user_id)
        if piece:
            text_arg = b"%d:" % number + seal.keys_current_seal(
                stream_kind(stream_id), piece.encode("utf-8"), number
            )
    written: bool = yield script_call(
        script,
        keys,
        (
            *scope_args(user_id, incarnation),
            stream_id,
            number,
            state.clock(),
            writer_ttl_ms,
            MAX_WRITES,
            text_arg,
            "1" if state.settings.encryption is not None else "",
        ),
        parse=lambda reply: int(reply) == 1,
        context=chat_context(chat_id),
        writes=False,
    )
    return written


#: Longest reason kept with a failed stream, in characters.
_REASON_CHARS = 500
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]+")


def failure_reason(error: BaseException) -> str:
    """What a failed stream's readers are told: the error's type and text, on one line."""
    described = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    return _CONTROL.sub(" ", described)[:_REASON_CHARS]


def end_stream(
    state: StoreState,
    chat_id: str,
    stream_id: str,
    *,
    done: bool,
    detail: str,
    keep_ms: int,
    user_id: str | None = None,
    incarnation: str | None = None,
) -> Operation[bool]:
    """Close the stream: ``done`` (``detail``: the saved message id) or failed (``detail``: the
    reason). True when it is closed so; False when it was closed otherwise or is gone (an
    answer ends "done" only while its stream is live)."""
    script, keys = _scripted("stream_end", state, chat_id)
    closed: bool = yield script_call(
        script,
        keys,
        (
            *scope_args(user_id, incarnation),
            stream_id,
            "done" if done else "failed",
            _CONTROL.sub(" ", detail)[:_REASON_CHARS],
            state.clock(),
            keep_ms,
        ),
        parse=lambda reply: int(reply) == 1,
        context=chat_context(chat_id),
        writes=False,
    )
    return closed


def active_stream(
    state: StoreState,
    chat_id: str,
    branch: str | None = None,
    *,
    user_id: str | None = None,
    incarnation: str | None = None,
) -> Operation[str | None]:
    """The stream id of the newest live answer stream of ``branch`` (the chat's active branch
    for None), or None."""
    if branch is not None:
        check_name(branch, "branch")
    script, keys = _scripted("active_stream", state, chat_id)
    found: str = yield script_call(
        script,
        keys,
        (*scope_args(user_id, incarnation), branch or "", state.clock()),
        parse=text,
        context=chat_context(chat_id),
    )
    return found or None


def read_stream(
    state: StoreState,
    chat_id: str,
    stream_id: str,
    *,
    after: str | None = None,
    user_id: str | None = None,
    wait_ms: int = WAIT_MS,
) -> Plan[None]:
    """The plan of a reader: emits every :class:`StreamPiece` of the stream after ``after``
    (from its start for None), in order, until the answer ends; a failed or stopped stream
    raises :class:`~ctxstore.errors.StreamFailedError` after the pieces written before it.
    Arguments are checked now, before anything is read."""
    first = check_stream_id(stream_id)
    start = f"{first[0]}-{first[1]}"
    if after is not None and check_entry_id(after) > first:
        start = after
    scope_args(user_id, None)
    state.keyspace.chat(chat_id)
    return _reading(state, chat_id, stream_id, start, user_id, wait_ms)


def _reading(
    state: StoreState,
    chat_id: str,
    stream_id: str,
    cursor: str,
    user_id: str | None,
    wait_ms: int,
) -> Plan[None]:
    late = 0  # reads in a row whose reply came too late
    last_write = 0  # a sealed stream's pieces come in the order of their writes
    while True:
        try:
            found: _Read = yield Run(
                _read_op(state, chat_id, stream_id, cursor, user_id, last_write)
            )
        except BackendTimeoutError:
            # A reader is read-only: a reply late because this process was busy (an event
            # loop held by other work past the socket's timeout) is asked again, not a failed
            # answer; a server that stays silent still fails it after a few.
            late += 1
            if late >= LATE_READS:
                raise
            continue
        late = 0
        last_write = max(last_write, found.last_write)
        for piece in found.pieces:
            yield Emit(piece)
        cursor = found.cursor
        if found.state == "done":
            return
        if found.state in ("failed", "stopped"):
            reason = found.detail if found.state == "failed" else "stopped"
            raise StreamFailedError(
                f"answer stream {stream_id!r} of chat {chat_id!r} ended without its answer: "
                + (found.detail if found.state == "failed" else "its writer stopped writing"),
                reason=reason,
                chat_id=chat_id,
                stream_id=stream_id,
            )
        if found.state == "live":
            # The wait only says when to read again: a late one reads now.
            with contextlib.suppress(BackendTimeoutError):
                yield Run(_wait_op(state, chat_id, cursor, wait_ms))


def _read_op(
    state: StoreState,
    chat_id: str,
    stream_id: str,
    cursor: str,
    user_id: str | None,
    last_write: int = 0,
) -> Operation[_Read]:
    """One read of the stream after ``cursor``; a sealed stream's pieces are opened, each one's
    write number after ``last_write`` (the last one read before): pieces moved out of their
    order are corruption."""
    script, keys = _scripted("read_stream", state, chat_id)
    stream_key = keys[1]

    def parse(reply: Sequence[Any]) -> tuple[str, str, str, list[Any]]:
        return text(reply[0]), text(reply[1]), text(reply[2]), list(reply[3])

    status, last, detail, flat = yield script_call(
        script,
        keys,
        (*scope_args(user_id, None), stream_id, cursor, READ_COUNT, state.clock()),
        parse=parse,
        context=chat_context(chat_id),
    )
    seal = None
    if state.settings.encryption is not None and flat:
        seal = yield from stream_seal(state, chat_id, user_id)
    pieces = []
    for index in range(0, len(flat), 2):
        entry = text(flat[index])
        if seal is not None:
            number, piece = open_piece(seal, stream_id, flat[index + 1], stream_key, entry)
            if number <= last_write:
                raise corrupt(
                    stream_key, entry, f"a piece of write {number} after write {last_write}"
                )
            last_write = number
        else:
            try:
                piece = text(flat[index + 1])
            except UnicodeDecodeError:
                written, _colon, rest = bytes(flat[index + 1]).partition(b":")
                if not (written.isdigit() and is_sealed(rest)):
                    raise corrupt(stream_key, entry, "a piece that is not UTF-8 text") from None
                if not state.show_closed:
                    raise ConfigurationError(
                        f"{stream_key} holds sealed pieces (a chat of a store with encryption):"
                        " this store has none; connect with encryption=<the KeyProvider>",
                        key=stream_key,
                    ) from None
                piece = ""  # a sealed piece, shown closed
        pieces.append(StreamPiece(entry, piece))
    return _Read(status, last, detail, tuple(pieces), last_write)


def _wait_op(state: StoreState, chat_id: str, cursor: str, wait_ms: int) -> Operation[None]:
    """Block until the chat's stream has an entry after ``cursor`` (or ``wait_ms`` passed)."""
    stream_key = state.keyspace.chat(chat_id).key("stream")
    yield command_call(
        ("XREAD", "BLOCK", wait_ms, "COUNT", 1, "STREAMS", stream_key, cursor), keys=(stream_key,)
    )


def wait_ms_for(socket_timeout: float | None) -> int:
    """How long one blocking read may wait on a client whose replies time out after
    ``socket_timeout`` seconds: :data:`WAIT_MS`, or half that timeout when it is shorter (a
    blocked read must never look like a dead server)."""
    timeout = socket_timeout
    if timeout is None:
        return WAIT_MS
    return max(1, min(WAIT_MS, int(timeout * 500)))
