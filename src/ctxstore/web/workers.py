"""The workers page: the compaction job streams of a namespace, read in one round trip.

Per stream: its length, the jobs pending in the workers' consumer group (per consumer, and how
long the oldest has waited), the consumers with their idle time; then the newest dead letters
with their last error, and every worker's last heartbeat. A Redis user without the rights to
these keys (a tenant's ACL user limited to its chats) gets the page with what it may read and
a note for the rest, not an error page.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ctxstore._core.format.fields import pairs, scored_pairs
from ctxstore._core.protocol import Call, Operation, command_call
from ctxstore._core.state import StoreState
from ctxstore.errors import CtxStoreError
from ctxstore.worker.streams import GROUP

#: Dead letters shown, newest first.
DEAD_LETTERS_SHOWN = 20


@dataclass
class StreamView:
    key: str
    length: int | None = None
    pending: int = 0
    oldest_pending_age_s: float | None = None
    consumers: list[tuple[str, int, float]] = field(default_factory=list)  # name, pending, idle s
    #: jobs the stream's bound trimmed before a worker took them (None: not readable)
    trimmed: int | None = None
    problem: str | None = None


@dataclass(frozen=True)
class LastJob:
    at_ms: int
    outcome: str
    chat_id: str


@dataclass(frozen=True)
class WorkerBeat:
    worker: str
    age_s: float  # since its last heartbeat
    last_job: LastJob | None


@dataclass
class WorkersView:
    streams: list[StreamView]
    dead_letters: list[dict[str, str]]
    heartbeats: list[WorkerBeat]
    problems: list[str]

    @property
    def length(self) -> int:
        return sum(stream.length or 0 for stream in self.streams)

    @property
    def pending(self) -> int:
        return sum(stream.pending for stream in self.streams)

    @property
    def trimmed(self) -> int:
        return sum(stream.trimmed or 0 for stream in self.streams)


def workers_view(state: StoreState, now_s: float) -> Operation[WorkersView]:
    keyspace = state.keyspace
    streams = keyspace.job_streams()
    calls: list[Call[Any]] = []  # four a stream, then the dead letters, beats and last jobs
    for stream in streams:
        calls.append(command_call(("XLEN", stream), (stream,)))
        calls.append(command_call(("XPENDING", stream, GROUP), (stream,)))
        calls.append(command_call(("XINFO", "CONSUMERS", stream, GROUP), (stream,)))
        counter = keyspace.trimmed_counter(stream)
        calls.append(command_call(("GET", counter), (counter,)))
    dead = keyspace.dead_letters
    calls.append(command_call(("XREVRANGE", dead, "+", "-", "COUNT", DEAD_LETTERS_SHOWN), (dead,)))
    calls.append(
        command_call(("ZRANGE", keyspace.workers, 0, -1, "WITHSCORES"), (keyspace.workers,))
    )
    last = keyspace.worker_last_jobs
    calls.append(command_call(("HGETALL", last), (last,)))
    replies = yield tuple(calls)
    problems: list[str] = []
    views = [_stream(stream, replies[4 * i : 4 * i + 4], now_s) for i, stream in enumerate(streams)]
    letters = []
    dead_reply, beats, last_jobs = replies[-3], replies[-2], replies[-1]
    if isinstance(dead_reply, CtxStoreError):
        problems.append(f"dead letters: {_problem(dead_reply)}")
    else:
        for entry_id, flat in dead_reply or ():
            fields = _pairs(flat)
            fields["entry"] = _text(entry_id)
            letters.append(fields)
    heartbeats: list[WorkerBeat] = []
    if isinstance(beats, CtxStoreError):
        problems.append(f"heartbeats: {_problem(beats)}")
    else:
        jobs = {} if isinstance(last_jobs, CtxStoreError) else _pairs(last_jobs)
        for name, beat in scored_pairs(beats):
            worker = _text(name)
            heartbeats.append(
                WorkerBeat(
                    worker, max(0.0, now_s - float(beat) / 1000), _last_job(jobs.get(worker))
                )
            )
    if any(view.problem for view in views):
        problems.append("job streams: " + next(v.problem for v in views if v.problem))
    return WorkersView(views, letters, heartbeats, problems)


def _stream(key: str, replies: Any, now_s: float) -> StreamView:
    """One job stream from its XLEN, XPENDING summary, XINFO CONSUMERS and trimmed-jobs
    counter. The oldest pending job's age comes from its entry id (the time it was enqueued)."""
    length, summary, consumers, trimmed = replies
    view = StreamView(key)
    if not isinstance(trimmed, CtxStoreError):
        view.trimmed = int(trimmed or 0)
    if isinstance(length, CtxStoreError):
        view.problem = _problem(length)
    else:
        view.length = int(length)
    if isinstance(summary, CtxStoreError):
        if "NOGROUP" not in str(summary):  # no worker has joined yet: nothing pending
            view.problem = view.problem or _problem(summary)
    elif summary:
        count, oldest = _pending(summary)
        view.pending = count
        if count and oldest:
            view.oldest_pending_age_s = max(0.0, now_s - int(oldest.split("-")[0]) / 1000)
    if not isinstance(consumers, CtxStoreError):
        for entry in consumers or ():
            fields = _pairs(entry)
            view.consumers.append(
                (
                    fields.get("name", "?"),
                    int(fields.get("pending", 0)),
                    int(fields.get("idle", 0)) / 1000,
                )
            )
    return view


def _pending(summary: Any) -> tuple[int, str]:
    """(count, smallest pending id) of an XPENDING summary: a list as Redis sends it, or the
    dict redis-py's reply callback makes of it."""
    if isinstance(summary, dict):
        return int(summary.get("pending") or 0), _text(summary.get("min") or "")
    return int(summary[0] or 0), _text(summary[1] or "")


def _last_job(raw: str | None) -> LastJob | None:
    parts = (raw or "").split("\t", 2)
    if len(parts) != 3 or not parts[0].isdigit():
        return None
    return LastJob(int(parts[0]), parts[1], parts[2])


def _problem(error: CtxStoreError) -> str:
    text = str(error)
    if "NOPERM" in text or "permission" in text.lower():
        return "this console's Redis user lacks the rights to read it"
    return text


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _pairs(flat: Any) -> dict[str, str]:
    """A flat or mapped field/value reply as text (values shown, not parsed)."""
    return {name: _text(value) for name, value in pairs(flat or ()).items()}
