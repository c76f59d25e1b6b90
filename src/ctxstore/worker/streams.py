"""The Redis Streams side of the compaction worker: the consumer group, reading, claiming,
acknowledging, dead letters and heartbeats.

Jobs of a namespace are spread over ``JOB_SHARDS`` streams (``Keyspace.job_streams``), each
under its own hash tag, and every command here names one key, so all of it works on a Cluster.
The group starts at the beginning of each stream (id ``0``): jobs saved before the first worker
ever started are not lost.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from redis.exceptions import ResponseError

from ctxstore._core.format.jobs import JOB_GROUP, read_job_fields
from ctxstore._core.keys import Keyspace

#: The consumer group every worker of a namespace joins.
GROUP = JOB_GROUP
#: Dead letters kept per namespace (``XADD MAXLEN ~``).
DEAD_LETTER_MAXLEN = 10_000


@dataclass(frozen=True)
class Job:
    """One compaction job as read from its stream."""

    stream: str
    entry_id: str
    chat_id: str
    branch: str
    marker: str
    soft_tokens: int | None
    keep: int
    deliveries: int = 1
    #: The W3C traceparent of the save that enqueued it (None: none carried).
    trace: str | None = None

    @classmethod
    def parse(cls, stream: str, entry_id: Any, fields: Mapping[Any, Any]) -> Job | None:
        """A job from a stream entry; None for an entry that is not one (acknowledged as is)."""
        found = read_job_fields(fields)
        if found is None:
            return None
        return cls(
            stream=stream,
            entry_id=_text(entry_id),
            chat_id=found.chat_id,
            branch=found.branch,
            marker=found.marker,
            soft_tokens=found.soft_tokens,
            keep=found.keep,
            trace=found.trace,
        )


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


class JobStreams:
    """The job streams of one namespace, read through one async redis-py client."""

    def __init__(self, client: Any, keyspace: Keyspace, consumer: str) -> None:
        self.client = client
        self.keyspace = keyspace
        self.consumer = consumer
        self.streams = keyspace.job_streams()

    async def join(self) -> None:
        """Create the consumer group on every stream (idempotent)."""
        for stream in self.streams:
            try:
                await self.client.xgroup_create(stream, GROUP, id="0", mkstream=True)
            except ResponseError as error:
                if "BUSYGROUP" not in str(error):
                    raise

    async def backlog(self) -> tuple[int, int]:
        """The jobs not yet done (acknowledged entries are deleted, so the streams' length) and
        the epoch ms of the oldest (0 for none), in one pipeline."""
        pipe = self.client.pipeline(transaction=False)
        for stream in self.streams:
            pipe.xlen(stream)
            pipe.xrange(stream, count=1)
        replies = await pipe.execute()
        pending = sum(int(length) for length in replies[0::2])
        oldest = [int(_text(entries[0][0]).split("-")[0]) for entries in replies[1::2] if entries]
        return pending, min(oldest, default=0)

    async def read(self, count: int) -> list[Job]:
        """Up to ``count`` new jobs, taken round the shards; nothing blocks."""
        jobs: list[Job] = []
        for stream in self.streams:
            if len(jobs) >= count:
                break
            reply = await self.client.xreadgroup(
                GROUP, self.consumer, {stream: ">"}, count=count - len(jobs)
            )
            for _name, entries in _stream_entries(reply):
                for entry_id, fields in entries:
                    job = Job.parse(stream, entry_id, fields or {})
                    if job is None:
                        await self.ack(stream, _text(entry_id))
                    else:
                        jobs.append(job)
        return jobs

    async def claim(self, min_idle_ms: int, count: int) -> list[Job]:
        """Jobs other consumers took and left idle for ``min_idle_ms`` (a dead worker's), with
        how many times each has been delivered."""
        jobs: list[Job] = []
        for stream in self.streams:
            if len(jobs) >= count:
                break
            reply = await self.client.xautoclaim(
                stream, GROUP, self.consumer, min_idle_ms, start_id="0-0", count=count - len(jobs)
            )
            entries = reply[1] if len(reply) > 1 else []
            for entry_id, fields in entries:
                if fields is None:  # deleted from the stream meanwhile
                    await self.ack(stream, _text(entry_id))
                    continue
                job = Job.parse(stream, entry_id, fields)
                if job is None:
                    await self.ack(stream, _text(entry_id))
                    continue
                deliveries = await self._deliveries(stream, job.entry_id)
                jobs.append(_with_deliveries(job, deliveries))
        return jobs

    async def _deliveries(self, stream: str, entry_id: str) -> int:
        pending = await self.client.xpending_range(stream, GROUP, entry_id, entry_id, 1)
        if not pending:
            return 1
        return int(pending[0].get("times_delivered", 1))

    async def ack(self, stream: str, entry_id: str) -> None:
        """Acknowledge a job and delete its entry: a stream holds only the jobs still to do
        (so its length is the backlog, and a chat's id leaves the stream with its last job)."""
        pipe = self.client.pipeline(transaction=False)
        pipe.xack(stream, GROUP, entry_id)
        pipe.xdel(stream, entry_id)
        await pipe.execute()

    async def dead_letter(self, job: Job, error: str, attempts: int) -> None:
        """Park a job that kept failing, with its error, then acknowledge it."""
        await self.client.xadd(
            self.keyspace.dead_letters,
            {
                "chat": job.chat_id,
                "branch": job.branch,
                "job": job.marker,
                "stream": job.stream,
                "entry": job.entry_id,
                "attempts": attempts,
                "error": error[:2000],
                "failed_at": int(time.time() * 1000),
            },
            maxlen=DEAD_LETTER_MAXLEN,
            approximate=True,
        )
        await self.ack(job.stream, job.entry_id)

    async def beat(self, now_ms: int) -> None:
        """Record that this worker is alive."""
        await self.client.zadd(self.keyspace.workers, {self.consumer: now_ms})

    async def record_last(self, job: Job, outcome: str, now_ms: int, *, named: bool = True) -> None:
        """Record this worker's last job and how it ended (the web console's workers page);
        without ``named``, the record leaves the chat's id out: a job whose chat is gone
        (deleted, erased) must not bring its id back into Redis."""
        value = f"{now_ms}\t{outcome}\t{job.chat_id if named else ''}"
        await self.client.hset(self.keyspace.worker_last_jobs, self.consumer, value)

    async def leave(self) -> bool:
        """Take this worker out of the consumer group and the heartbeat records (a worker that
        stops leaves no trace); a stream where it still holds jobs keeps it, so those jobs stay
        claimable by name. True when it left everywhere."""
        left = True
        for stream in self.streams:
            if await self._pending_of(stream, self.consumer):
                left = False
                continue
            await self._forget_consumer(stream, self.consumer)
        if left:
            await self._forget_worker(self.consumer)
        return left

    async def reap(self, now_ms: int, silent_ms: int) -> list[str]:
        """Remove the workers silent for ``silent_ms`` (no heartbeat, or a consumer idle that
        long that no live heartbeat names) from the group and the heartbeat records, once they
        hold no job: their pending jobs are claimed first (``claim``, after ``claim_idle_ms``,
        shorter than the silence), and a worker still holding one is left for a later round.
        Returns the workers removed."""
        horizon = now_ms - silent_ms
        beats = await self.client.zrange(self.keyspace.workers, 0, -1, withscores=True)
        alive = {_text(name) for name, beat in beats if float(beat) >= horizon}
        silent = {_text(name) for name, beat in beats if float(beat) < horizon}
        for stream in self.streams:
            try:
                consumers = await self.client.xinfo_consumers(stream, GROUP)
            except ResponseError:
                continue  # no group yet
            for consumer in consumers:
                name = _text(consumer.get("name", ""))
                if name and name not in alive and int(consumer.get("idle", 0)) >= silent_ms:
                    silent.add(name)
        silent.discard(self.consumer)
        removed = []
        for name in sorted(silent):
            holding = False
            for stream in self.streams:
                if await self._pending_of(stream, name):
                    holding = True
                    break
            if holding:
                continue
            for stream in self.streams:
                await self._forget_consumer(stream, name)
            await self._forget_worker(name)
            removed.append(name)
        return removed

    async def trimmed(self) -> int:
        """How many jobs the streams' bound trimmed before a worker took them, in all."""
        total = 0
        for stream in self.streams:
            value = await self.client.get(self.keyspace.trimmed_counter(stream))
            total += int(value or 0)
        return total

    async def _pending_of(self, stream: str, consumer: str) -> int:
        try:
            pending = await self.client.xpending_range(
                stream, GROUP, "-", "+", 1, consumername=consumer
            )
        except ResponseError:
            return 0  # no group: nothing pending
        return len(pending)

    async def _forget_consumer(self, stream: str, consumer: str) -> None:
        with contextlib.suppress(ResponseError):  # no group on this stream: nothing to leave
            await self.client.xgroup_delconsumer(stream, GROUP, consumer)

    async def _forget_worker(self, consumer: str) -> None:
        await self.client.zrem(self.keyspace.workers, consumer)
        await self.client.hdel(self.keyspace.worker_last_jobs, consumer)


def _with_deliveries(job: Job, deliveries: int) -> Job:
    return Job(
        job.stream,
        job.entry_id,
        job.chat_id,
        job.branch,
        job.marker,
        job.soft_tokens,
        job.keep,
        deliveries,
    )


def _stream_entries(reply: Any) -> Sequence[tuple[Any, Sequence[tuple[Any, Any]]]]:
    """XREADGROUP's reply as (stream, entries), whether RESP2 (a list) or RESP3 (a dict)."""
    if not reply:
        return []
    if isinstance(reply, Mapping):
        return [
            (name, entries[0] if entries and isinstance(entries[0], list) else entries)
            for name, entries in reply.items()
        ]
    return [(name, entries) for name, entries in reply]


async def live_workers(client: Any, keyspace: Keyspace, max_age_ms: int, now_ms: int) -> int:
    """How many workers of the namespace beat within ``max_age_ms``."""
    return int(await client.zcount(keyspace.workers, now_ms - max_age_ms, "+inf"))


async def dead_letters(client: Any, keyspace: Keyspace, count: int) -> list[dict[str, Any]]:
    """The newest ``count`` dead letters, newest first, as plain dicts."""
    entries = await client.xrevrange(keyspace.dead_letters, count=count)
    letters = []
    for entry_id, fields in entries:
        letter: dict[str, Any] = {"id": _text(entry_id)}
        letter.update({_text(key): _text(value) for key, value in fields.items()})
        letters.append(letter)
    return letters


def log_line(**fields: Any) -> str:
    """One structured log line (JSON, keys sorted)."""
    return json.dumps(fields, sort_keys=True, default=str)
