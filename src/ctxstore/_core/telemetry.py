"""OpenTelemetry: a span and a duration per store operation, the counters of what happened, and
the trace context a compaction job carries from the save that enqueued it to its worker.

Built on ``opentelemetry-api`` (``ctxstore[otel]``) and used only when it is installed: the
API is imported with the first operation, never by ``import ctxstore``. With no provider
configured the API's tracer and meter are no-ops; every operation then costs one provider check
(:func:`watch` returns None) and nothing else.

A span is named after the public operation (``ctxstore append``) and follows the database
conventions: ``db.system.name`` (``redis``), ``db.operation.name``, ``server.address`` /
``server.port``, plus ``ctxstore.script`` (the Lua scripts it ran), ``ctxstore.namespace``,
``ctxstore.round_trips`` and ``ctxstore.outcome`` (``applied``, ``conflict``, ``rebased``,
``forked``). The chat id is on it only when the operator opts in (``Settings.trace_chat_ids``);
else ``ctxstore.chat`` is an HMAC-SHA256 of it under ``Settings.trace_key``, or absent. No
attribute or event holds message text, nor an error's message (which may name a chat): an error
is recorded by its type. A plan (a sweep, an import, an export read lazily) is one span; the
operations it runs are its round trips.

Metrics (one meter, ``ctxstore``): ``ctxstore.operation.duration`` (seconds, by operation and
outcome), the counters ``ctxstore.conflicts``, ``.rebases``, ``.forks``, ``.lease_losses``,
``.stream.pieces``,
``.jobs`` (by result), and ``ctxstore.cache.hits`` / ``.misses`` (observed from the process's
chain caches, nothing counted on the read path). The worker reports ``ctxstore.jobs.pending``
and ``ctxstore.jobs.oldest_age`` (:func:`observe_jobs`).
"""

from __future__ import annotations

import contextvars
import hashlib
import hmac
import time
from collections.abc import AsyncIterator, Callable, Generator, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar

from ctxstore._base.plans import Emit
from ctxstore.errors import ConflictError, LeaseLostError

T = TypeVar("T")

TRACER_NAME = "ctxstore"
_CACHE_DESCRIPTIONS = {
    "hits": "Chain reads of this process that found a cached chain to extend",
    "misses": "Chain reads of this process that found no cached chain",
}
#: Where each operation's outcome comes from when it is not "applied".
_CONFLICTS = (ConflictError,)


class _Otel:
    """The OpenTelemetry API and ctxstore's instruments, made once a process."""

    def __init__(self) -> None:
        from opentelemetry import context, metrics, propagate, trace
        from opentelemetry.trace import ProxyTracerProvider, SpanKind, Status, StatusCode

        self.trace = trace
        self.context = context
        self.metrics = metrics
        self.propagate = propagate
        self.proxy_tracer_provider = ProxyTracerProvider
        self.span_kind = SpanKind
        self.status = Status
        self.error_code = StatusCode.ERROR
        self.tracer = trace.get_tracer(TRACER_NAME)
        meter = metrics.get_meter(TRACER_NAME)
        self.duration = meter.create_histogram(
            "ctxstore.operation.duration",
            unit="s",
            description="How long a store operation took, by operation and outcome",
        )
        self.counters = {
            name: meter.create_counter(f"ctxstore.{name}", description=description)
            for name, description in (
                ("conflicts", "Writes whose expected head had moved (raised or resolved)"),
                ("rebases", "Appends rebased onto a head that had moved"),
                ("forks", "Appends forked onto a new branch at a head that had moved"),
                ("lease_losses", "Writes refused because another turn took the chat's lease"),
                ("stream.pieces", "Pieces written to answer streams"),
                ("jobs", "Compaction jobs a worker finished, by result"),
            )
        }
        for field in ("hits", "misses"):
            meter.create_observable_counter(
                f"ctxstore.cache.{field}",
                [_cache_observer(field)],
                description=_CACHE_DESCRIPTIONS[field],
            )

    def tracing(self) -> bool:
        return not isinstance(self.trace.get_tracer_provider(), self.proxy_tracer_provider)

    def metering(self) -> bool:
        # Until an application sets one, the global meter provider is the API's proxy.
        return type(self.metrics.get_meter_provider()).__name__ != "_ProxyMeterProvider"


def _cache_observer(field: str) -> Callable[[Any], list[Any]]:
    def observe(_options: Any) -> list[Any]:
        from opentelemetry.metrics import Observation

        from ctxstore._core.state import REGISTRY

        total = sum(getattr(caches.chains, field) for caches in REGISTRY.all_caches())
        return [Observation(total)]

    return observe


_LOADED: dict[str, _Otel | None] = {}


def otel() -> _Otel | None:
    """The API, loaded on first use; None when ``opentelemetry-api`` is not installed."""
    if "api" not in _LOADED:
        try:
            _LOADED["api"] = _Otel()
        except ImportError:
            _LOADED["api"] = None
    return _LOADED["api"]


def active() -> _Otel | None:
    """The API when a tracer or a meter provider is configured, else None (the free path)."""
    api = otel()
    if api is None or not (api.tracing() or api.metering()):
        return None
    return api


#: The operation being traced in this context: a plan's steps count as its round trips.
_CURRENT: contextvars.ContextVar[Watch | None] = contextvars.ContextVar(
    "ctxstore_operation", default=None
)


def chat_attribute(settings: Any, chat_id: str) -> str | None:
    """What a span says of ``chat_id``: the id (opted in), its HMAC under the trace key, or
    None."""
    if settings.trace_chat_ids:
        return chat_id
    key = settings.trace_key
    if key is None:
        return None
    raw = key.encode() if isinstance(key, str) else key
    return hmac.new(raw, chat_id.encode(), hashlib.sha256).hexdigest()


class Watch:
    """One store operation (or plan) being traced and timed."""

    def __init__(self, api: _Otel, state: Any, name: str, chat_id: object) -> None:
        self.api = api
        self.name = name
        self.round_trips = 0
        self.scripts: list[str] = []
        self.outcome = "applied"
        self._started = time.perf_counter()
        attributes: dict[str, Any] = {
            "db.system.name": "redis",
            "db.operation.name": name,
            "ctxstore.namespace": state.keyspace.namespace or "",
        }
        host, _, port = (state.server or "").rpartition(":")
        if host and port.isdigit():
            attributes["server.address"] = host
            attributes["server.port"] = int(port)
        elif state.embedded:
            attributes["server.address"] = "memory"
        if isinstance(chat_id, str):
            chat = chat_attribute(state.settings, chat_id)
            if chat is not None:
                attributes["ctxstore.chat"] = chat
        self.span = api.tracer.start_span(
            f"ctxstore {name}", kind=api.span_kind.CLIENT, attributes=attributes
        )
        self._token: contextvars.Token[Watch | None] | None = None
        self._context_token: object = None

    def enter(self) -> None:
        """Make the span current (children and a job's trace context hang from it)."""
        self._token = _CURRENT.set(self)
        self._context_token = self.api.context.attach(self.api.trace.set_span_in_context(self.span))

    def exit(self) -> None:
        if self._context_token is not None:
            self.api.context.detach(self._context_token)
            self._context_token = None
        if self._token is not None:
            _CURRENT.reset(self._token)
            self._token = None

    def step(self, scripts: tuple[str, ...]) -> None:
        """A round trip is sent, running ``scripts``."""
        self.round_trips += 1
        for script in scripts:
            if script not in self.scripts:
                self.scripts.append(script)

    def finish(self, result: object) -> None:
        self.outcome = outcome_of(result)
        self._close(None)

    def fail(self, error: BaseException) -> None:
        self.outcome = "conflict" if isinstance(error, _CONFLICTS) else "error"
        if isinstance(error, LeaseLostError):
            self.api.counters["lease_losses"].add(1, {"operation": self.name})
        self._close(error)

    def _close(self, error: BaseException | None) -> None:
        self.exit()
        span = self.span
        span.set_attribute("ctxstore.round_trips", self.round_trips)
        span.set_attribute("ctxstore.outcome", self.outcome)
        if self.scripts:
            span.set_attribute("ctxstore.script", ",".join(self.scripts))
        if error is not None:
            kind = type(error).__name__
            span.set_attribute("error.type", kind)
            span.add_event("exception", {"exception.type": kind})
            span.set_status(self.api.status(self.api.error_code, kind))
        span.end()
        labels = {"operation": self.name, "outcome": self.outcome}
        self.api.duration.record(time.perf_counter() - self._started, labels)
        counted = {"conflict": "conflicts", "rebased": "rebases", "forked": "forks"}
        if self.outcome in counted:
            self.api.counters[counted[self.outcome]].add(1, {"operation": self.name})
            if self.outcome != "conflict":
                self.api.counters["conflicts"].add(1, {"operation": self.name})
        if self.name == "write_stream" and self.outcome == "applied":
            self.api.counters["stream.pieces"].add(1)


def outcome_of(result: object) -> str:
    """``rebased`` / ``forked`` for an append that resolved a conflict, else ``applied``."""
    if getattr(result, "rebased", False):
        return "rebased"
    if getattr(result, "conflict_fork", None):
        return "forked"
    return "applied"


class _Step:
    """An operation run as a step of a watched plan: its round trips and scripts count there;
    the plan's span ends with the plan."""

    def __init__(self, plan: Watch) -> None:
        self.plan = plan

    def step(self, scripts: tuple[str, ...]) -> None:
        self.plan.step(scripts)

    def finish(self, result: object) -> None:
        if self.plan.outcome == "applied":
            self.plan.outcome = outcome_of(result)

    def fail(self, error: BaseException) -> None:
        pass  # the plan handles what its step raised, or fails with it


def watch(state: Any, operation: Any) -> Watch | _Step | None:
    """A watch of ``operation`` (a core operation's generator), or None when telemetry is
    off; a step of a plan already watched counts its round trips there."""
    current = _CURRENT.get()
    if current is not None:
        return _Step(current)
    api = active()
    if api is None:
        return None
    name, chat_id = _named(operation)
    found = Watch(api, state, name, chat_id)
    found.enter()
    return found


def _named(operation: Any) -> tuple[str, object]:
    """An operation's name (its generator function's: the public operation's, by the core's
    naming) and the chat it acts on (its ``chat_id`` argument, read before it starts)."""
    frame = getattr(operation, "gi_frame", None)
    chat_id = frame.f_locals.get("chat_id") if frame is not None else None
    return getattr(operation, "__name__", "operation"), chat_id


def current() -> Watch | None:
    """The operation watched in this context (a plan's), for its steps' round trips."""
    return _CURRENT.get()


@contextmanager
def watched(state: Any, name: str, chat_id: str | None = None) -> Iterator[Watch | None]:
    """A plan (several operations) traced as one operation named ``name``."""
    api = None if _CURRENT.get() is not None else active()
    if api is None:
        yield None
        return
    found = Watch(api, state, name, chat_id)
    found.enter()
    try:
        yield found
    except BaseException as error:
        found.fail(error)
        raise
    found.finish(None)


def watched_iter(
    state: Any, name: str, items: Iterator[T], chat_id: str | None = None
) -> Iterator[T]:
    """``items`` (a plan read lazily) traced as one operation, until it is read out or closed;
    the operation is current only while an item is being made, never between items."""
    with watched(state, name, chat_id) as found:
        if found is None:
            yield from items
            return
        found.exit()
        steps = iter(items)
        while True:
            found.enter()
            try:
                item = next(steps)
            except StopIteration:
                return
            finally:
                found.exit()
            yield item


async def awatched_iter(
    state: Any, name: str, items: AsyncIterator[T], chat_id: str | None = None
) -> AsyncIterator[T]:
    """:func:`watched_iter` of an async plan."""
    with watched(state, name, chat_id) as found:
        if found is not None:
            found.exit()
        while True:
            if found is not None:
                found.enter()
            try:
                item = await items.__anext__()
            except StopAsyncIteration:
                return
            finally:
                if found is not None:
                    found.exit()
            yield item


def watched_plan(state: Any, plan: Generator[Any, Any, T]) -> Generator[Any, Any, T]:
    """``plan`` (a sweep, an import, an export read lazily...) traced as one operation named
    after it: the operations it runs are its round trips. It is current while the plan works,
    not while a value it emits is with its reader."""
    name, chat_id = _named(plan)
    with watched(state, name, chat_id if isinstance(chat_id, str) else None) as found:
        if found is None:
            return (yield from plan)
        sent: Any = None
        error: BaseException | None = None
        while True:
            try:
                step = plan.send(sent) if error is None else plan.throw(error)
            except StopIteration as stop:
                result: T = stop.value
                return result
            sent, error = None, None
            emitting = isinstance(step, Emit)
            if emitting:
                found.exit()
            try:
                sent = yield step
            except GeneratorExit:
                plan.close()
                raise
            except BaseException as raised:  # thrown in by the driver: the plan handles it
                error = raised
            if emitting:
                found.enter()


# --- spans above the store: the engine, a chat() turn, a worker's job --------------------------


@contextmanager
def span(name: str, attributes: Mapping[str, Any] | None = None) -> Iterator[Any]:
    """A span named ``name`` (None when tracing is off), current for the block; an error is
    recorded by its type."""
    api = active()
    if api is None or not api.tracing():
        yield None
        return
    with api.tracer.start_as_current_span(
        name,
        attributes=dict(attributes or {}),
        record_exception=False,
        set_status_on_exception=False,
    ) as found:
        try:
            yield found
        except BaseException as error:
            kind = type(error).__name__
            found.set_attribute("error.type", kind)
            found.add_event("exception", {"exception.type": kind})
            found.set_status(api.status(api.error_code, kind))
            raise


def traceparent() -> str:
    """The current trace context as a W3C ``traceparent`` ("" when there is none): what a
    compaction job carries from the save that enqueued it."""
    api = _LOADED.get("api")
    if api is None or not api.tracing():
        return ""
    carrier: dict[str, str] = {}
    api.propagate.inject(carrier)
    value = carrier.get("traceparent", "")
    return value if _TRACEPARENT_CHARS.issuperset(value) else ""


_TRACEPARENT_CHARS = frozenset("0123456789abcdef-")


@contextmanager
def job_span(traceparent_: str | None, attributes: Mapping[str, Any]) -> Iterator[Any]:
    """A worker job's span, a child of the save that enqueued it when its entry carried the
    trace context."""
    api = active()
    if api is None or not api.tracing():
        yield None
        return
    parent = api.propagate.extract({"traceparent": traceparent_}) if traceparent_ else None
    with api.tracer.start_as_current_span(
        "ctxstore job",
        context=parent,
        kind=api.span_kind.CONSUMER,
        attributes=dict(attributes),
        record_exception=False,
        set_status_on_exception=False,
    ) as found:
        yield found


def count_job(result: str) -> None:
    """A job finished: ``done``, ``failed`` (to be retried) or ``dead``."""
    api = active()
    if api is not None:
        api.counters["jobs"].add(1, {"result": result})


_OBSERVED: dict[str, Callable[[], Mapping[str, float]]] = {}


def observe_jobs(namespace: str, read: Callable[[], Mapping[str, float]]) -> None:
    """Report ``ctxstore.jobs.pending`` and ``ctxstore.jobs.oldest_age`` (seconds) of
    ``namespace`` from ``read`` (the worker's last look at its streams), on collection."""
    api = otel()
    if api is None:
        return
    first = not _OBSERVED
    _OBSERVED[namespace] = read
    if not first:
        return
    meter = api.metrics.get_meter(TRACER_NAME)

    def gauge(field: str) -> Callable[[Any], list[Any]]:
        def observe(_options: Any) -> list[Any]:
            from opentelemetry.metrics import Observation

            return [
                Observation(values[field], {"ctxstore.namespace": name})
                for name, values in ((n, r()) for n, r in list(_OBSERVED.items()))
                if field in values
            ]

        return observe

    meter.create_observable_gauge(
        "ctxstore.jobs.pending", [gauge("pending")], description="Compaction jobs not yet done"
    )
    meter.create_observable_gauge(
        "ctxstore.jobs.oldest_age",
        [gauge("oldest_age")],
        unit="s",
        description="How long the oldest compaction job has waited",
    )
