"""Compaction job entries: the fields a job carries in its stream (``XADD``), written by the
append script on a single server and by :func:`ctxstore._core.ops.jobs.enqueue_compaction`
elsewhere (:func:`job_fields`), read by the worker (:func:`read_job_fields`).

A job names its chat and branch, the compaction marker it settles (``job``), and what the
compaction keeps: the context size that makes it due (``soft``, "" when the job always
compacts) and the newest messages kept verbatim (``keep``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ctxstore.models import CompactionTrigger

#: The consumer group every worker of a namespace joins (on each job stream).
JOB_GROUP = "ctxstore-compaction"

#: Compaction job streams keep about this many entries (``XADD MAXLEN ~``); the append script
#: uses the same bound.
JOB_STREAM_MAXLEN = 100_000


def job_fields(
    chat_id: str, branch: str, job: str, trigger: CompactionTrigger, trace: str = ""
) -> tuple[str | int, ...]:
    """The fields of a job entry (the append script writes the same ones); ``trace``: the
    saving caller's W3C traceparent, carried to the worker's span ("" for none)."""
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
    ) + (("trace", trace) if trace else ())


#: What a job keeps verbatim when its entry does not say (an entry of an older writer).
DEFAULT_KEEP = 4


@dataclass(frozen=True)
class JobFields:
    """The fields of one job entry, read back."""

    chat_id: str
    branch: str
    marker: str
    soft_tokens: int | None
    keep: int
    #: The W3C traceparent of the save that enqueued it (None: none carried).
    trace: str | None = None


def read_job_fields(fields: Mapping[Any, Any]) -> JobFields | None:
    """A job entry's fields (bytes or text); None for an entry that is not a job."""
    values = {_text(key): _text(value) for key, value in fields.items()}
    chat, branch = values.get("chat"), values.get("branch")
    if not chat or not branch:
        return None
    soft, keep = values.get("soft", ""), values.get("keep", "")
    return JobFields(
        chat_id=chat,
        branch=branch,
        marker=values.get("job", ""),
        soft_tokens=int(soft) if soft.isdigit() else None,
        keep=int(keep) if keep.isdigit() else DEFAULT_KEEP,
        trace=values.get("trace") or None,
    )


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
