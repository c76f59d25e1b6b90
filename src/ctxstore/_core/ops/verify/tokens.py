"""The verify checks of the token entries (``tok``) and the summaries (``summary``).

Unlike alias, runs or branch records, neither derives from the records alone: a token count is
what the writer's tokenizer said at save, and a summary is text a model wrote. So these checks
report; ``--repair`` leaves both as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ctxstore._core.format.summaries import parse_summary_member
from ctxstore._core.format.tokens import TOK_WIDTH
from ctxstore.errors import CorruptionError

#: A check's report: (kind, key, field, detail).
Report = Callable[[str, str, str, str], None]


def check_token_entries(
    report: Report, key: str, tok: bytes, parents: Sequence[int | None]
) -> None:
    """One entry per log position; a known flag; chain totals never smaller than the parent's
    (a message's own count is the difference, so it is never negative)."""
    if len(tok) != TOK_WIDTH * len(parents):
        report(
            "tokens",
            key,
            "",
            f"{len(tok)} bytes for {len(parents)} messages (expected {TOK_WIDTH} per message)",
        )
        return
    totals = [
        int.from_bytes(tok[p * TOK_WIDTH + 1 : (p + 1) * TOK_WIDTH], "big")
        for p in range(len(parents))
    ]
    for position, parent in enumerate(parents):
        flags = tok[position * TOK_WIDTH]
        if flags not in (0, 1):
            report("tokens", key, str(position), f"unknown flags {flags}")
        if parent is None or parent < 0:
            continue
        if totals[position] < totals[parent]:
            report(
                "tokens",
                key,
                str(position),
                f"chain total {totals[position]} below its parent's {totals[parent]}",
            )


def check_summaries(
    report: Report,
    key: str,
    summaries: Sequence[tuple[bytes, float]],
    id_of: Callable[[int], str | None],
    length: int,
) -> None:
    """Every summary hangs on a message of the log, names that message, and is a record."""
    for member, score in summaries:
        if not (0 <= score < length) or score != int(score):  # inf and -inf fail the range
            report("summary", key, str(score), "scored with no position of the log")
            continue
        position = int(score)
        try:
            summary = parse_summary_member(member, key, position)
        except CorruptionError as error:
            report("summary", key, str(position), str(error))
            continue
        expected = id_of(position)
        if expected is not None and summary["message_id"] != expected:
            report(
                "summary",
                key,
                str(position),
                f"names message {summary['message_id']!r}, the message there is {expected!r}",
            )
