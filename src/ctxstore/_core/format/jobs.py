"""Compaction job entries: the fields a job carries in its stream (``XADD``), written by the
append script on a single server and by :func:`ctxstore._core.ops.jobs.enqueue_compaction`
elsewhere, read by the worker."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ctxstore.models import CompactionTrigger

#: Compaction job streams keep about this many entries (``XADD MAXLEN ~``); the append script
#: uses the same bound.
JOB_STREAM_MAXLEN = 100_000


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
