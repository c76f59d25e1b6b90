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

from collections.abc import Sequence

from ctxstore._core.format.jobs import job_fields
from ctxstore._core.protocol import Operation, script_call
from ctxstore._core.scripts import load_script
from ctxstore._core.state import StoreState
from ctxstore.models import CompactionTrigger


def enqueue_compaction(
    state: StoreState,
    chat_id: str,
    branch: str,
    job: str,
    trigger: CompactionTrigger,
    trace: str = "",
) -> Operation[str]:
    """Add a job whose marker a save set to its shard's stream; returns the entry id."""
    fields = job_fields(chat_id, branch, job, trigger, trace)
    entry: str = yield from enqueue_job(state, chat_id, fields)
    return entry


def enqueue_job(state: StoreState, chat_id: str, fields: Sequence[str | int]) -> Operation[str]:
    """Add a job (its field, value pairs) to the stream of ``chat_id``'s shard, counting what
    the stream's bound trims (``enqueue_job.lua``); returns the entry id."""
    script = load_script("enqueue_job")
    entry: str = yield script_call(
        script,
        state.keyspace.job_keys(chat_id),
        tuple(fields),
        parse=lambda raw: raw.decode() if isinstance(raw, bytes) else str(raw),
        writes=True,
    )
    return entry
