"""Compaction jobs: the trigger a save carries, and the job that follows a save on a Cluster.

A save with a :class:`CompactionTrigger` checks, inside the append script, whether the branch's
context (its newest summary plus the messages after it, in stored tokens) reached the soft
threshold; if so, and no job of the chat is pending, it sets the chat's ``cjob`` marker. The
marker makes the decision atomic: however many workers save at once, one job per chat is
enqueued, and none again until a summary settles it (``write_summary`` clears it) or it is older
than ``job_ttl_ms`` (a job lost with a crashed process does not block the chat for ever).

On a single server the script adds the job to its stream itself. On a Cluster the streams live
in other slots, so the job is added right after the reply (:func:`enqueue_compaction`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ctxstore.core.protocol import Operation, command_call
from ctxstore.core.state import StoreState
from ctxstore.errors import ConfigurationError

#: Compaction job streams keep about this many entries (``XADD MAXLEN ~``); the append script
#: uses the same bound.
JOB_STREAM_MAXLEN = 100_000
#: A pending job older than this may be enqueued again by a later save (milliseconds).
DEFAULT_JOB_TTL_MS = 15 * 60 * 1000


@dataclass(frozen=True)
class CompactionTrigger:
    """What a save checks: the context size (tokens) that makes a compaction job due."""

    soft_tokens: int
    job_ttl_ms: int = DEFAULT_JOB_TTL_MS

    def __post_init__(self) -> None:
        for name in ("soft_tokens", "job_ttl_ms"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigurationError(f"{name} must be a non-negative integer, got {value!r}")


def job_fields(chat_id: str, branch: str, job: str) -> tuple[str, ...]:
    """The fields of a job entry (the append script writes the same ones)."""
    return ("chat", chat_id, "branch", branch, "job", job)


def enqueue_compaction(state: StoreState, chat_id: str, branch: str, job: str) -> Operation[str]:
    """Add a job whose marker a save set to its shard's stream; returns the entry id."""
    stream = state.keyspace.job_stream(chat_id)
    entry: str = yield command_call(
        ("XADD", stream, "MAXLEN", "~", JOB_STREAM_MAXLEN, "*", *job_fields(chat_id, branch, job)),
        (stream,),
        parse=lambda raw: raw.decode() if isinstance(raw, bytes) else str(raw),
    )
    return entry
