"""The compaction worker: any number of processes, on any number of machines, share the jobs.

Each worker joins one consumer group per namespace, reads new jobs round the shard streams,
claims jobs a dead worker left idle (``XAUTOCLAIM``), and runs up to ``concurrency`` of them at
once. A job is one :func:`~ctxstore.window.compaction.compaction` of its chat's branch, under the
chat's lease; it is idempotent (a prefix already summarized is a no-op) and acknowledged when
done. A failing summarizer is retried with exponential backoff; after ``max_attempts``
failures, or a job delivered more than ``max_attempts`` times (its workers died), the job goes
to the dead-letter stream with its error.

Async inside; :meth:`Worker.run` is the sync entry point. A sync summarizer runs in a thread,
so the jobs in hand and the signals are served while it works. SIGTERM / SIGINT: stop taking
jobs, finish the ones in hand, return; a second signal exits the process at once (the jobs in
hand stay pending and go to another worker).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxstore._base.plans import Pause, Step, aperformer, arun_plan
from ctxstore._core import telemetry
from ctxstore._core.failures import TRANSPORT_ERRORS
from ctxstore._core.ops import sweep as sweeping
from ctxstore.crypto.provider import KeyProvider
from ctxstore.errors import (
    BackendBusyError,
    BackendUnavailableError,
    ChatNotFoundError,
    ConfigurationError,
)
from ctxstore.messages.tokens import MessageCounter, TokenCounter, message_counter
from ctxstore.store.async_store import AsyncStore, connect_async
from ctxstore.window.compaction import (
    CompactionPolicy,
    CompactionResult,
    arun_compaction,
    compaction,
)
from ctxstore.window.manager import ContextManager
from ctxstore.worker.command import DEFAULT_SWEEP_EVERY_MS, DEFAULT_SWEEP_PAUSE_MS
from ctxstore.worker.liveness import LivenessFile
from ctxstore.worker.streams import Job, JobStreams, log_line

log = logging.getLogger("ctxstore.worker")

#: What a turn of the loop waits out rather than stopping the worker: Redis away, busy or hung.
_OUTAGES: tuple[type[BaseException], ...] = (
    *TRANSPORT_ERRORS,
    BackendUnavailableError,
    BackendBusyError,
    asyncio.TimeoutError,
)

#: The outcome of a job whose chat is gone (deleted or erased): its record names no chat.
CHAT_GONE = "chat gone"
#: A job idle this long in another consumer's hands is taken over (its worker died).
DEFAULT_CLAIM_IDLE_MS = 60_000
#: How long a job's compaction may hold its chat (summarizer included).
DEFAULT_JOB_TIMEOUT_MS = 10 * 60 * 1000

AsyncSummarize = Callable[[list[dict[str, Any]]], "Awaitable[str] | str"]


@dataclass
class WorkerStats:
    """What a worker did (returned by :meth:`Worker.run`)."""

    summarized: int = 0
    skipped: int = 0
    failed: int = 0
    dead_lettered: int = 0
    results: list[CompactionResult] = field(default_factory=list)


class Worker:
    """A compaction worker. The summaries come from ``context_manager`` (its ``compactify=``
    or ``summary_model``, and its model and estimator count the tokens), else ``compactify``
    (messages -> text, sync or async), else litellm with ``summary_model``. ``encryption``:
    the key provider of the stores whose chats it compacts, when they seal them (a sealed
    chat's messages open only with it). ``prefix``: the stores' key prefix (``Settings.prefix``)."""

    def __init__(
        self,
        url: str | None = None,
        *,
        namespaces: Sequence[str | None] = (None,),
        context_manager: ContextManager | None = None,
        compactify: AsyncSummarize | None = None,
        summary_model: str | None = None,
        concurrency: int = 4,
        max_attempts: int = 3,
        backoff_ms: int = 1000,
        poll_ms: int = 500,
        claim_idle_ms: int = DEFAULT_CLAIM_IDLE_MS,
        job_timeout_ms: int = DEFAULT_JOB_TIMEOUT_MS,
        heartbeat_ms: int = 5000,
        forget_after_ms: int | None = None,
        sweep_every_ms: int = DEFAULT_SWEEP_EVERY_MS,
        sweep_pause_ms: int = DEFAULT_SWEEP_PAUSE_MS,
        consumer: str | None = None,
        token_model: str | None = None,
        estimate_tokens: TokenCounter | None = None,
        summarizer_options: dict[str, Any] | None = None,
        live_file: str | os.PathLike[str] | None = None,
        encryption: KeyProvider | None = None,
        prefix: str = "ctx",
    ) -> None:
        for name, value in (
            ("concurrency", concurrency),
            ("max_attempts", max_attempts),
            ("poll_ms", poll_ms),
            ("claim_idle_ms", claim_idle_ms),
            ("job_timeout_ms", job_timeout_ms),
            ("heartbeat_ms", heartbeat_ms),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigurationError(f"{name} must be a positive integer, got {value!r}")
        for name, value in (
            ("backoff_ms", backoff_ms),
            ("sweep_every_ms", sweep_every_ms),
            ("sweep_pause_ms", sweep_pause_ms),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigurationError(f"{name} must be a non-negative integer, got {value!r}")
        if forget_after_ms is None:
            forget_after_ms = max(6 * heartbeat_ms, 2 * claim_idle_ms)
        if (
            isinstance(forget_after_ms, bool)
            or not isinstance(forget_after_ms, int)
            or forget_after_ms <= claim_idle_ms
        ):
            raise ConfigurationError(
                "forget_after_ms must be an integer above claim_idle_ms (a silent worker's jobs "
                f"are claimed before it is forgotten), got {forget_after_ms!r}"
            )
        if not namespaces:
            raise ConfigurationError("a worker needs at least one namespace (None: the default)")
        if context_manager is not None:
            if not isinstance(context_manager, ContextManager):
                raise ConfigurationError(
                    f"context_manager must be a ContextManager, got {context_manager!r}"
                )
            if context_manager.compactify_function is None and not (
                summary_model or context_manager.summary_model
            ):
                raise ConfigurationError(
                    "a worker needs a summarizer: the context_manager has neither "
                    "compactify= nor summary_model="
                )
            summary_model = summary_model or context_manager.summary_model
            token_model = token_model or context_manager.model
            estimate_tokens = estimate_tokens or context_manager.estimate_tokens
        if encryption is not None and not isinstance(encryption, KeyProvider):
            raise ConfigurationError(f"encryption must be a KeyProvider, got {encryption!r}")
        self.url = url
        self.namespaces = tuple(namespaces)
        self._encryption = encryption
        #: ``encryption=`` for the worker's stores, only when given (None is the default).
        self._sealing: dict[str, Any] = {} if encryption is None else {"encryption": encryption}
        self._prefix = prefix
        self.summarize: AsyncSummarize = (
            context_manager.asummarize
            if context_manager is not None and compactify is None
            else _summarizer(compactify, summary_model, summarizer_options or {})
        )
        self.summary_model = summary_model
        self.concurrency = concurrency
        self.max_attempts = max_attempts
        self.backoff_ms = backoff_ms
        self.poll_ms = poll_ms
        self.claim_idle_ms = claim_idle_ms
        self.job_timeout_ms = job_timeout_ms
        self.heartbeat_ms = heartbeat_ms
        self.forget_after_ms = forget_after_ms
        self.sweep_every_ms = sweep_every_ms
        self.sweep_pause_ms = sweep_pause_ms
        self.consumer = consumer or f"{socket.gethostname()}-{os.getpid()}-{os.urandom(3).hex()}"
        self.count_message: MessageCounter = message_counter(token_model, estimate_tokens)
        self._token_model = token_model
        self._estimate_tokens = estimate_tokens
        self._stopping = False
        self._tasks: set[asyncio.Task[None]] = set()
        self._trimmed_seen: dict[str, int] = {}
        self.stats = WorkerStats()
        #: The file ``ctxstore worker --live`` reads (None: the worker keeps none).
        #: The longest a turn of the loop may take (Redis hung past it counts as away): so the
        #: loop turns at least every two of these, and --live allows three.
        self.turn_budget_ms = max(poll_ms, 1000)
        self.live = None if live_file is None else LivenessFile(live_file, self.turn_budget_ms)
        self._outage_logged = 0.0
        #: Each namespace's backlog as the upkeep last read it (jobs pending, the oldest's age).
        self._backlog: dict[str, dict[str, float]] = {}

    # --- entry points ----------------------------------------------------------------------

    def run(self, *, burst: bool = False) -> WorkerStats:
        """Work until stopped (SIGTERM, SIGINT, :meth:`stop`), or with ``burst`` until no job
        is left; returns what was done."""
        return asyncio.run(self.arun(burst=burst, handle_signals=True))

    def stop(self) -> None:
        """Take no new job; the ones in hand finish."""
        self._stopping = True

    async def arun(self, *, burst: bool = False, handle_signals: bool = False) -> WorkerStats:
        """The async form of :meth:`run`."""
        stores = [  # a worker compacts any user's chats: an operator's handle
            connect_async(
                self.url,
                namespace=namespace,
                token_model=self._token_model,
                estimate_tokens=self._estimate_tokens,
                prefix=self._prefix,
                **self._sealing,
            ).admin()
            for namespace in self.namespaces
        ]
        if handle_signals:
            self._install_signal_handlers()
        if self.live is not None:
            self.live.start()
        try:
            streams = [
                JobStreams(store.client, store.state.keyspace, self.consumer) for store in stores
            ]
            for group in streams:
                await group.join()
                self._observe(group)
            sweeps = [] if burst else self._start_sweeps(stores)
            try:
                await self._loop(list(zip(stores, streams, strict=True)), burst)
            finally:
                self._stopping = True  # the sweeps end at their next pause
                await asyncio.gather(*sweeps, return_exceptions=True)
            for group in streams:
                await self._leave(group)
        finally:
            if self.live is not None:
                self.live.stop()
            for store in stores:
                await store.close()
        return self.stats

    # --- upkeep: leaving, reaping, trimmed jobs, the sweep -------------------------------------

    async def _leave(self, streams: JobStreams) -> None:
        """A worker that stops leaves no trace: out of the group and the heartbeat records."""
        try:
            left = await streams.leave()
        except Exception as caught:  # upkeep never fails the worker's exit
            log.warning(log_line(event="leave_failed", error=str(caught)))
            return
        if not left:
            log.info(log_line(event="left_with_pending_jobs", worker=self.consumer))

    def _observe(self, streams: JobStreams) -> None:
        """Report the namespace's backlog as OpenTelemetry gauges (when the API is there),
        from what the upkeep last read."""
        if telemetry.otel() is None:
            return
        namespace = streams.keyspace.namespace or ""
        self._backlog[namespace] = {}
        telemetry.observe_jobs(namespace, lambda: self._backlog.get(namespace, {}))

    async def _upkeep(self, streams: JobStreams, now_ms: int) -> None:
        """Forget the workers silent past ``forget_after_ms`` (their jobs claimed first), and
        warn when the streams' bound trimmed jobs no worker took."""
        namespace = streams.keyspace.namespace or ""
        if namespace in self._backlog:
            try:
                pending, oldest_ms = await streams.backlog()
            except _OUTAGES as caught:
                log.warning(log_line(event="upkeep_failed", error=str(caught)))
            else:
                self._backlog[namespace] = {
                    "pending": pending,
                    "oldest_age": max(0, now_ms - oldest_ms) / 1000 if oldest_ms else 0.0,
                }
        try:
            removed = await streams.reap(now_ms, self.forget_after_ms)
            trimmed = await streams.trimmed()
        except Exception as caught:
            log.warning(log_line(event="upkeep_failed", error=str(caught)))
            return
        if removed:
            log.info(log_line(event="workers_forgotten", workers=removed))
        seen = self._trimmed_seen.get(streams.keyspace.base)
        self._trimmed_seen[streams.keyspace.base] = trimmed
        if trimmed and (seen is None or trimmed > seen):
            log.warning(
                log_line(
                    event="jobs_trimmed",
                    namespace=streams.keyspace.namespace,
                    count=trimmed - (seen or 0),
                    total=trimmed,
                    hint="the job streams hit their bound before workers took these jobs: "
                    "add workers or concurrency",
                )
            )

    def _start_sweeps(self, stores: Sequence[AsyncStore]) -> list[asyncio.Task[None]]:
        if not self.sweep_every_ms:
            return []
        loop = asyncio.get_running_loop()
        return [loop.create_task(self._sweep_forever(store)) for store in stores]

    async def _sweep_forever(self, store: AsyncStore) -> None:
        """The background sweep: one pass every ``sweep_every_ms``, taken by one worker of the
        namespace at a time (a lease), ``sweep_pause_ms`` between its steps. A worker that stops
        ends its pass at the next pause (never in the middle of a command) and exits."""
        pause = self.sweep_pause_ms / 1000
        perform = aperformer(store.run)

        async def paced(step: Step) -> Any:
            if isinstance(step, Pause) and self._stopping:
                raise _SweepStoppedError
            return await perform(step)

        while not self._stopping:
            try:
                if await self._sweep_lease(store):
                    plan = sweeping.sweep(store.state, pause=pause or 0.0)
                    report = await arun_plan(plan, paced)
                    log.info(log_line(event="sweep", **report.as_dict()))
            except _SweepStoppedError:
                return
            except Exception as caught:  # the sweep is upkeep: it never stops the worker
                log.warning(log_line(event="sweep_failed", error=str(caught)))
            waited = 0.0
            while not self._stopping and waited < self.sweep_every_ms / 1000:
                await asyncio.sleep(min(0.05, self.sweep_every_ms / 1000))
                waited += 0.05

    async def _sweep_lease(self, store: AsyncStore) -> bool:
        key = f"{store.state.keyspace.base}:sweeping"
        try:
            taken = await store.client.set(key, self.consumer, nx=True, px=self.sweep_every_ms)
        except Exception:  # a Redis user without SET: sweep anyway (it is idempotent)
            return True
        return bool(taken)

    # --- the loop ----------------------------------------------------------------------------

    async def _loop(self, sources: list[tuple[AsyncStore, JobStreams]], burst: bool) -> None:
        slots = asyncio.Semaphore(self.concurrency)
        last_beat = 0.0
        last_claim = 0.0
        while not self._stopping:
            now = time.monotonic()
            if self.live is not None:
                self.live.turned()
            try:
                found = await asyncio.wait_for(
                    self._turn(sources, slots, now, last_beat, last_claim),
                    self.turn_budget_ms / 1000,
                )
            except _OUTAGES as outage:
                # Redis is away or hung: the loop waits and goes on turning (the pod stays
                # live; its readiness probe, which asks Redis, takes it out of service). A job
                # a cut-short read took is claimed again after claim_idle_ms. A server that
                # came back without its data has lost the consumer group: it is made again.
                self._log_outage(outage)
                await asyncio.sleep(self.poll_ms / 1000)
                if "NOGROUP" in str(outage):
                    await self._rejoin(sources)
                continue
            if (now - last_beat) * 1000 >= self.heartbeat_ms:
                last_beat = now
            if now - last_claim >= min(self.claim_idle_ms, 5000) / 1000:
                last_claim = now
            if found == 0:
                if burst and not self._tasks:
                    return
                await asyncio.sleep(self.poll_ms / 1000)
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _turn(
        self,
        sources: list[tuple[AsyncStore, JobStreams]],
        slots: asyncio.Semaphore,
        now: float,
        last_beat: float,
        last_claim: float,
    ) -> int:
        """One turn of the loop: beat and upkeep when due, then take what jobs there is room
        for; returns how many were started."""
        if (now - last_beat) * 1000 >= self.heartbeat_ms:
            for _store, streams in sources:
                await streams.beat(int(time.time() * 1000))
                await self._upkeep(streams, int(time.time() * 1000))
        free = self.concurrency - len(self._tasks)
        found = 0
        for store, streams in sources:
            if free - found <= 0:
                break
            claim_due = (now - last_claim) * 1000 >= min(self.claim_idle_ms, 5000)
            jobs = await streams.claim(self.claim_idle_ms, free - found) if claim_due else []
            jobs += await streams.read(free - found - len(jobs))
            for job in jobs:
                await slots.acquire()
                self._start(store, streams, job, slots)
            found += len(jobs)
        return found

    async def _rejoin(self, sources: list[tuple[AsyncStore, JobStreams]]) -> None:
        try:
            for _store, streams in sources:
                await streams.join()
        except _OUTAGES as outage:
            self._log_outage(outage)

    def _log_outage(self, outage: BaseException) -> None:
        """One warning a minute while Redis is away (not one a poll)."""
        now = time.monotonic()
        if now - self._outage_logged >= 60:
            log.warning(log_line(event="redis_unavailable", error=str(outage)))
            self._outage_logged = now

    def _start(
        self, store: AsyncStore, streams: JobStreams, job: Job, slots: asyncio.Semaphore
    ) -> None:
        task = asyncio.get_running_loop().create_task(self._handle(store, streams, job))
        self._tasks.add(task)

        def done(finished: asyncio.Task[None]) -> None:
            self._tasks.discard(finished)
            slots.release()

        task.add_done_callback(done)

    async def _handle(self, store: AsyncStore, streams: JobStreams, job: Job) -> None:
        """One job, in a span of its own: a child of the save that enqueued it when the job's
        entry carried that trace."""
        attributes: dict[str, Any] = {
            "ctxstore.namespace": streams.keyspace.namespace or "",
            "ctxstore.job": job.entry_id,
            "ctxstore.deliveries": job.deliveries,
        }
        chat = telemetry.chat_attribute(store.state.settings, job.chat_id)
        if chat is not None:
            attributes["ctxstore.chat"] = chat
        with telemetry.job_span(job.trace, attributes):
            await self._work(store, streams, job)

    async def _work(self, store: AsyncStore, streams: JobStreams, job: Job) -> None:
        started = time.monotonic()
        if job.deliveries > self.max_attempts:
            await self._dead(streams, job, "delivered too many times (its workers died)", started)
            return
        policy = CompactionPolicy(
            min_recent_messages=job.keep,
            soft_tokens=job.soft_tokens,
            lease_ttl_ms=self.job_timeout_ms,
            summary_model=self.summary_model,
        )
        error = ""
        for attempt in range(1, self.max_attempts + 1):
            steps = compaction(
                store.state, job.chat_id, job.branch, policy, self.count_message, job=job.marker
            )
            try:
                result = await arun_compaction(store.run, steps, self.summarize)
            except ChatNotFoundError:
                await streams.ack(job.stream, job.entry_id)
                await self._finish(streams, job, CHAT_GONE, started)
                return
            except Exception as caught:  # a summarizer or server failure: retried
                error = f"{type(caught).__name__}: {caught}"
                self.stats.failed += 1
                telemetry.count_job("failed")
                log.warning(
                    log_line(
                        event="job_retry",
                        job=job.entry_id,
                        chat=job.chat_id,
                        attempt=attempt,
                        error=error,
                    )
                )
                if attempt < self.max_attempts:
                    await asyncio.sleep(self.backoff_ms * 2 ** (attempt - 1) / 1000)
                continue
            if result.skipped == "leased":
                # Another summarizer holds the chat: leave the job pending, to be claimed again.
                await self._finish(streams, job, "leased", started)
                return
            await streams.ack(job.stream, job.entry_id)
            telemetry.count_job("done")
            self.stats.results.append(result)
            if result.skipped is None:
                self.stats.summarized += 1
            else:
                self.stats.skipped += 1
            await self._finish(streams, job, result.skipped or "summarized", started, result)
            return
        await self._dead(streams, job, error, started)

    async def _dead(self, streams: JobStreams, job: Job, error: str, started: float) -> None:
        telemetry.count_job("dead")
        await streams.dead_letter(job, error, max(job.deliveries, self.max_attempts))
        self.stats.dead_lettered += 1
        await self._finish(streams, job, "dead letter", started, error=error)

    async def _finish(
        self,
        streams: JobStreams,
        job: Job,
        outcome: str,
        started: float,
        result: CompactionResult | None = None,
        error: str | None = None,
    ) -> None:
        """Log a job's end (one JSON line) and record it as this worker's last job (a failure to
        record it is logged: the job itself is done)."""
        fields: dict[str, Any] = {
            "event": "job",
            "job": job.entry_id,
            "chat": job.chat_id,
            "branch": job.branch,
            "outcome": outcome,
            "latency_ms": round((time.monotonic() - started) * 1000, 1),
        }
        if result is not None:
            fields.update(
                tokens_before=result.tokens_before,
                tokens_after=result.tokens_after,
                context_tokens=result.context_tokens,
                covered=result.covered,
            )
        if error:
            fields["error"] = error
        log.info(log_line(**fields))
        try:
            await streams.record_last(
                job, outcome, int(time.time() * 1000), named=outcome != CHAT_GONE
            )
        except Exception as caught:  # the record is for operators only: never fail the job
            log.warning(log_line(event="last_job_not_recorded", error=str(caught)))

    def _install_signal_handlers(self) -> None:
        loop = asyncio.get_running_loop()

        def on_signal() -> None:
            if self._stopping:
                # The second signal: leave at once. The jobs in hand stay pending in their
                # streams and their leases expire, so another worker finishes them.
                log.warning(log_line(event="exit", jobs_abandoned=len(self._tasks)))
                os._exit(1)
            self._stopping = True
            log.info(log_line(event="stopping", jobs_in_hand=len(self._tasks)))

        for number in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.add_signal_handler(number, on_signal)
            except (NotImplementedError, RuntimeError):  # not the main thread, or Windows
                return


class _SweepStoppedError(Exception):
    """The worker is stopping: its background sweep ends at this pause."""


def _summarizer(
    compactify: AsyncSummarize | None, summary_model: str | None, options: dict[str, Any]
) -> AsyncSummarize:
    """The summarizer a worker calls: ``compactify`` when given, else litellm with
    ``summary_model``."""
    if compactify is not None:
        if not callable(compactify):
            raise ConfigurationError(f"compactify must be a function, got {compactify!r}")
        return compactify
    if summary_model is None:
        raise ConfigurationError(
            "a worker needs a summarizer: summary_model= (a litellm model name, or "
            "--summary-model / CTXSTORE_SUMMARY_MODEL) or compactify="
        )
    from ctxstore.window.summarizer import litellm_summarizer

    return litellm_summarizer(summary_model, **options)
