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
``forked``, ``resent``). The chat id is on it only when the operator opts in
(``Settings.trace_chat_ids``); else ``ctxstore.chat`` is an HMAC-SHA256 of it under
``Settings.trace_key``, or absent. No attribute or event holds message text, nor an error's
message (which may name a chat): an error is recorded by its type. A plan (a sweep, an import,
an export read lazily) is one span; the operations it runs are its round trips.

Metrics (one meter, ``ctxstore``): ``ctxstore.operation.duration`` (seconds, by operation and
outcome), the counters ``ctxstore.conflicts``, ``.rebases``, ``.forks``, ``.resends``,
``.lease_losses``, ``.stream.pieces``, ``.jobs`` (by result), and ``ctxstore.cache.hits`` /
``.misses`` (observed from the process's chain caches, nothing counted on the read path). The
worker reports ``ctxstore.jobs.pending`` and ``ctxstore.jobs.oldest_age`` (:func:`observe_jobs`).
"""

from __future__ import annotations

import contextvars
import hashlib
import hmac
import time
from collections.abc import AsyncIterator, Callable, Generator, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Protocol, TypeVar

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
        from opentelemetry import context, metrics, trace
        from opentelemetry.trace import ProxyTracerProvider, SpanKind, Status, StatusCode

        self.trace = trace
        self.context = context
        self.metrics = metrics
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
                ("resends", "Writes sent again after a lost reply, answered without writing"),
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

    @property
    def propagate(self) -> Any:
        """The propagation API (imported when a trace context is carried: a cold start that
        carries none does not pay for it)."""
        from opentelemetry import propagate

        return propagate

    #: Set once a provider is found: OpenTelemetry's global providers are set once a process.
    _traced = False
    _metered = False

    def tracing(self) -> bool:
        if not self._traced:
            provider = self.trace.get_tracer_provider()
            self._traced = not isinstance(provider, self.proxy_tracer_provider)
        return self._traced

    def metering(self) -> bool:
        if not self._metered:
            # Until an application sets one, the global meter provider is the API's proxy.
            provider = self.metrics.get_meter_provider()
            self._metered = type(provider).__name__ != "_ProxyMeterProvider"
        return self._metered


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


def tracing() -> bool:
    """Whether a tracer provider is configured: what a caller asks before it builds a span's
    attributes."""
    api = otel()
    return api is not None and api.tracing()


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


def chat_attributes(state: Any, chat_id: object, key: str = "ctxstore.chat") -> dict[str, Any]:
    """The namespace of ``state``'s store, and what a span may say of ``chat_id`` under
    ``key`` (see :func:`chat_attribute`)."""
    attributes: dict[str, Any] = {"ctxstore.namespace": state.keyspace.namespace or ""}
    if isinstance(chat_id, str):
        chat = chat_attribute(state.settings, chat_id)
        if chat is not None:
            attributes[key] = chat
    return attributes


def _server_attributes(state: Any) -> Mapping[str, Any]:
    """The attributes every span of ``state``'s store has, made once a store."""
    found: Mapping[str, Any] | None = getattr(state, "_span_attributes", None)
    if found is not None:
        return found
    attributes: dict[str, Any] = {
        "db.system.name": "redis",
        "ctxstore.namespace": state.keyspace.namespace or "",
    }
    host, _, port = (state.server or "").rpartition(":")
    if host and port.isdigit():
        attributes["server.address"] = host
        attributes["server.port"] = int(port)
    elif state.embedded:
        attributes["server.address"] = "memory"
    state._span_attributes = attributes
    return attributes


#: The labels of one operation's duration, by (operation, outcome): made once, not each call.
_LABELS: dict[tuple[str, str], dict[str, str]] = {}


def _labels(name: str, outcome: str) -> dict[str, str]:
    found = _LABELS.get((name, outcome))
    if found is None:
        found = _LABELS[(name, outcome)] = {"operation": name, "outcome": outcome}
    return found


class Watch:
    """One store operation (or plan) being traced and timed."""

    def __init__(self, api: _Otel, state: Any, name: str, chat_id: object) -> None:
        self.api = api
        self.name = name
        self.round_trips = 0
        self.scripts: list[str] = []
        self.outcome = "applied"
        #: Set by :func:`resent`: a reply said the store had applied this call before.
        self.resent = False
        self._started = time.perf_counter()
        attributes = dict(_server_attributes(state))
        attributes["db.operation.name"] = name
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
        self.outcome = "resent" if self.resent else outcome_of(result)
        self._close(None)

    def fail(self, error: BaseException) -> None:
        self.outcome = "conflict" if isinstance(error, _CONFLICTS) else "error"
        if isinstance(error, LeaseLostError):
            self.api.counters["lease_losses"].add(1, {"operation": self.name})
        self._close(error)

    def _close(self, error: BaseException | None) -> None:
        self.exit()
        span = self.span
        if span.is_recording():  # an unsampled span keeps nothing: nothing is built for it
            ended: dict[str, Any] = {
                "ctxstore.round_trips": self.round_trips,
                "ctxstore.outcome": self.outcome,
            }
            if self.scripts:
                ended["ctxstore.script"] = ",".join(self.scripts)
            span.set_attributes(ended)
            if error is not None:
                _record_error(self.api, span, error)
        span.end()
        self.api.duration.record(
            time.perf_counter() - self._started, _labels(self.name, self.outcome)
        )
        counted = _COUNTED.get(self.outcome)
        if counted is not None:
            self.api.counters[counted].add(1, {"operation": self.name})
            if self.outcome in ("rebased", "forked"):
                self.api.counters["conflicts"].add(1, {"operation": self.name})
        if self.name == "write_stream" and self.outcome == "applied":
            self.api.counters["stream.pieces"].add(1)


#: The counter each outcome other than "applied" adds to (a rebase or a fork is a conflict too).
_COUNTED = {"conflict": "conflicts", "rebased": "rebases", "forked": "forks", "resent": "resends"}


def resent() -> None:
    """The reply being read says the store had applied this call already (a resend after a
    lost reply, answered from the chat's request ring): the operation's outcome is
    ``resent``."""
    found = _CURRENT.get()
    if found is not None:
        found.resent = True


def recalled(reply: Any) -> Any:
    """The reply of a script that answers a resent call as ``{reply, "resent"}`` (see its
    contract): the reply, the resend told to the operation's span."""
    if isinstance(reply, list) and len(reply) == 2 and reply[1] in _RESENT:
        resent()
        return reply[0]
    return reply


_RESENT = (b"resent", "resent")


def outcome_of(result: object) -> str:
    """``resent`` for a write the store had applied already (answered from its request ring),
    ``rebased`` / ``forked`` for an append that resolved a conflict, else ``applied``."""
    if getattr(result, "resent", False) is True:
        return "resent"
    if getattr(result, "rebased", False):
        return "rebased"
    if getattr(result, "conflict_fork", None) or getattr(result, "forked_at", None):
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
    settings = state.settings
    name, chat_id = _named(operation, settings.trace_chat_ids or settings.trace_key is not None)
    found = Watch(api, state, name, chat_id)
    found.enter()
    return found


def _named(operation: Any, chat: bool = True) -> tuple[str, object]:
    """An operation's name (its generator function's: the public operation's, by the core's
    naming) and, when ``chat``, the chat it acts on (its ``chat_id`` argument, read before it
    starts; reading a frame's arguments costs, so only when a span may show it)."""
    name = getattr(operation, "__name__", "operation")
    if name == "together":  # operations sharing round trips: named after each of them
        inner = [_named(step, chat) for step in _arguments(operation).get("operations", ())]
        chats = {found for _, found in inner if isinstance(found, str)}
        return "+".join(part for part, _ in inner) or name, next(iter(chats), None)
    public = _PUBLIC_NAMES.get(name)
    if public is None:
        public = _PUBLIC_NAMES[name] = name.strip("_").removesuffix("_op")
    return public, _arguments(operation).get("chat_id") if chat else None


def _arguments(operation: Any) -> Mapping[str, Any]:
    frame = getattr(operation, "gi_frame", None)
    return frame.f_locals if frame is not None else {}


#: Span names by generator name; the engine's operations are named after what they do for it
#: (``save_op`` -> save, ``ensure_open`` -> open).
_PUBLIC_NAMES = {"ensure_open": "open", "open_op": "open"}


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


class _Current(Protocol):
    def enter(self) -> None: ...

    def exit(self) -> None: ...


def during(found: _Current | None, items: Iterator[T]) -> Iterator[T]:
    """``items``, with ``found`` current only while an item is being made, never while an item
    is with its reader (whose own spans are not ours)."""
    if found is None:
        yield from items
        return
    steps = iter(items)
    try:
        while True:
            found.enter()
            try:
                item = next(steps)
            except StopIteration:
                return
            finally:
                found.exit()
            yield item
    finally:  # closed early: what ``items`` does on close (an answer's cleanup) is traced too
        close = getattr(steps, "close", None)
        if close is not None:
            found.enter()
            try:
                close()
            finally:
                found.exit()


async def aduring(found: _Current | None, items: AsyncIterator[T]) -> AsyncIterator[T]:
    """The async form of :func:`during`."""
    try:
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
    finally:
        close = getattr(items, "aclose", None)
        if close is not None:
            if found is not None:
                found.enter()
            try:
                await close()
            finally:
                if found is not None:
                    found.exit()


def watched_iter(
    state: Any, name: str, items: Iterator[T], chat_id: str | None = None
) -> Iterator[T]:
    """``items`` (a plan read lazily) traced as one operation, until it is read out or closed;
    the operation is current only while an item is being made, never between items."""
    with watched(state, name, chat_id) as found:
        if found is not None:
            found.exit()
        yield from during(found, items)


async def awatched_iter(
    state: Any, name: str, items: AsyncIterator[T], chat_id: str | None = None
) -> AsyncIterator[T]:
    """:func:`watched_iter` of an async plan."""
    with watched(state, name, chat_id) as found:
        if found is not None:
            found.exit()
        async for item in aduring(found, items):
            yield item


def watched_plan(
    state: Any, plan: Generator[Any, Any, T], name: str | None = None
) -> Generator[Any, Any, T]:
    """``plan`` (a sweep, an import, an export read lazily...) traced as one operation named
    ``name`` (default: after the plan's generator): the operations it runs are its round
    trips. It is current while the plan works, not while a value it emits is with its
    reader."""
    found_name, chat_id = _named(plan)
    name = name or found_name
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
            _record_error(api, found, error)
            raise


def annotate(attributes: Mapping[str, Any]) -> None:
    """Add ``attributes`` to the current span (nothing when tracing is off)."""
    api = _LOADED.get("api")
    if api is None or not api.tracing():
        return
    api.trace.get_current_span().set_attributes(dict(attributes))


class Opened:
    """A span that stays open across the steps of something read piece by piece (a ``chat()``
    answer): current only while one of its steps runs (:func:`during`), ended once."""

    def __init__(self, api: _Otel, found: Any) -> None:
        self.api = api
        self.span = found
        self._tokens: list[object] = []
        self.ended = False

    def enter(self) -> None:
        self._tokens.append(self.api.context.attach(self.api.trace.set_span_in_context(self.span)))

    def exit(self) -> None:
        if self._tokens:
            self.api.context.detach(self._tokens.pop())

    def end(self, attributes: Mapping[str, Any], error: BaseException | None = None) -> None:
        """Set ``attributes``, record ``error`` by its type, and end the span (once)."""
        if self.ended:
            return
        self.ended = True
        self.span.set_attributes(dict(attributes))
        if error is not None:
            _record_error(self.api, self.span, error)
        self.span.end()


@contextmanager
def made_current(found: _Current | None) -> Iterator[None]:
    """``found`` (an :class:`Opened` span, or None) current for the block."""
    if found is None:
        yield
        return
    found.enter()
    try:
        yield
    finally:
        found.exit()


def opened(name: str, attributes: Mapping[str, Any]) -> Opened | None:
    """An :class:`Opened` span named ``name``, a child of the current one; None when tracing
    is off."""
    api = active()
    if api is None or not api.tracing():
        return None
    return Opened(api, api.tracer.start_span(name, attributes=dict(attributes)))


def _record_error(api: _Otel, found: Any, error: BaseException) -> None:
    """An error on a span, by its type only: its message may name a chat or quote a user."""
    kind = type(error).__name__
    found.set_attribute("error.type", kind)
    found.add_event("exception", {"exception.type": kind})
    found.set_status(api.status(api.error_code, kind))


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
