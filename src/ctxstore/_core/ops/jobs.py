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

from ctxstore._core.format.jobs import JOB_STREAM_MAXLEN, job_fields
from ctxstore._core.protocol import Operation, command_call
from ctxstore._core.state import StoreState
from ctxstore.models import CompactionTrigger


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
