"""The verify checks of the token entries (``tok``) and the summaries (``summary``).

An entry's flag derives from its message's payload (:func:`~ctxstore._core.format.tokens.
flags_of`): a wrong one is reported, and ``--repair`` rewrites it, since a window or a
compaction that trusts it could start with an orphaned tool result. The totals do not derive
from the records (a token count is what the writer's tokenizer said at save), nor does a
summary (text a model wrote): those are reported and left as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ctxstore._core.format.sealed import ChatSeal, MissingDataKeyError
from ctxstore._core.format.summaries import closed_summary, parse_summary_member
from ctxstore._core.format.tokens import KNOWN_FLAGS, TOK_WIDTH, entry_at
from ctxstore.errors import ConfigurationError, CorruptionError

#: A check's report: (kind, key, field, detail).
Report = Callable[[str, str, str, str], None]


def check_token_entries(
    report: Report,
    key: str,
    tok: bytes,
    parents: Sequence[int | None],
    flags: Sequence[int | None],
) -> dict[int, int]:
    """One entry per log position; each flag the one its message's payload gives (``flags``,
    None where the record is broken); chain totals never smaller than the parent's (a
    message's own count is the difference, so it is never negative). Returns the flags to
    rewrite: position -> the flag the payload gives."""
    if len(tok) != TOK_WIDTH * len(parents):
        report(
            "tokens",
            key,
            "",
            f"{len(tok)} bytes for {len(parents)} messages (expected {TOK_WIDTH} per message)",
        )
        return {}
    entries = [entry_at(tok, position) for position in range(len(parents))]
    rewrites: dict[int, int] = {}
    for position, (parent, expected) in enumerate(zip(parents, flags, strict=True)):
        stored, total = entries[position]
        if stored not in KNOWN_FLAGS:
            report("tokens", key, str(position), f"unknown flags {stored}")
        elif expected is not None and stored != expected:
            report(
                "tokens",
                key,
                str(position),
                f"flags {stored}, the message's payload gives {expected} (1: it continues the "
                "tool group of the message before it, so no window may start with it)",
            )
            rewrites[position] = expected
        if parent is None or parent < 0:
            continue
        if total < entries[parent][1]:
            report(
                "tokens",
                key,
                str(position),
                f"chain total {total} below its parent's {entries[parent][1]}",
            )
    return rewrites


def check_summaries(
    report: Report,
    key: str,
    summaries: Sequence[tuple[bytes, float]],
    id_of: Callable[[int], str | None],
    length: int,
    seal: ChatSeal | None = None,
) -> None:
    """Every summary hangs on a message of the log, names that message, and is a record (a
    sealed chat's opened with ``seal``; with nothing to open it, checked up to its sealed
    content)."""
    for member, score in summaries:
        if not (0 <= score < length) or score != int(score):  # inf and -inf fail the range
            report("summary", key, str(score), "scored with no position of the log")
            continue
        position = int(score)
        try:
            summary = parse_summary_member(member, key, position, seal)
        except CorruptionError as error:
            report("summary", key, str(position), str(error))
            continue
        except MissingDataKeyError as missing:
            detail = f"sealed with key {missing.key_id!r}, not a data key of the chat's owner"
            report("summary", key, str(position), detail)
            continue
        except ConfigurationError:  # sealed, and nothing here opens it: its record is sound
            summary = closed_summary(member, key, position)
        expected = id_of(position)
        if expected is not None and summary["message_id"] != expected:
            report(
                "summary",
                key,
                str(position),
                f"names message {summary['message_id']!r}, the message there is {expected!r}",
            )
