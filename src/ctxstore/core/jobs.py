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
    """What a save checks: the context size (tokens) that makes a compaction job due. The job
    carries ``soft_tokens`` and ``min_recent_messages`` (what the compaction keeps verbatim), so
    a worker needs no per-chat settings of its own."""

    soft_tokens: int
    job_ttl_ms: int = DEFAULT_JOB_TTL_MS
    min_recent_messages: int = 4

    def __post_init__(self) -> None:
        for name in ("soft_tokens", "job_ttl_ms", "min_recent_messages"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigurationError(f"{name} must be a non-negative integer, got {value!r}")


def job_fields(
    chat_id: str, branch: str, job: str, trigger: CompactionTrigger
) -> tuple[str | int, ...]:
    """The fields of a job entry (the append script writes the same ones)."""
    return (
        "chat",
        chat_id,
        "branch",
        branch,
        "job",
        job,
        "soft",
        trigger.soft_tokens,
        "keep",
        trigger.min_recent_messages,
    )


def enqueue_compaction(
    state: StoreState, chat_id: str, branch: str, job: str, trigger: CompactionTrigger
) -> Operation[str]:
    """Add a job whose marker a save set to its shard's stream; returns the entry id."""
    stream = state.keyspace.job_stream(chat_id)
    fields = job_fields(chat_id, branch, job, trigger)
    entry: str = yield command_call(
        ("XADD", stream, "MAXLEN", "~", JOB_STREAM_MAXLEN, "*", *fields),
        (stream,),
        parse=lambda raw: raw.decode() if isinstance(raw, bytes) else str(raw),
        writes=True,
    )
    return entry
