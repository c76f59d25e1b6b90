"""ContextEngine and AsyncContextEngine: one chat's context, as a sync or an async API.

Both are thin shells over :class:`~ctxstore.engine.core.EngineCore`: every method runs
one core operation with the store's ``run`` (sync) or ``await run`` (async). They have the same
names and signatures; a test checks it. An engine is cheap: make one per request or task, and
do not share one between concurrent tasks.

Typical turn::

    engine = ContextEngine(store=store, chat_id="c1", user_id="alice")
    engine.set(role("You are terse."), user("Hi"))
    context = engine.resolve()                       # one round trip
    reply = litellm.completion(model=..., messages=context.with_system())
    engine.set(message(reply.choices[0].message))
    engine.save()                                    # one round trip
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from datetime import timedelta
from typing import Any, Generic, TypeVar

from ctxstore._base.plans import (
    AsyncPerform,
    Perform,
    aperformer,
    arun_plan,
    performer,
    run_plan,
)
from ctxstore._base.twins import documented_by
from ctxstore._core.ops.streams import DEFAULT_STREAM_TTL, DEFAULT_WRITER_TTL
from ctxstore._core.ops.turns import TurnStrategy
from ctxstore._core.protocol import Operation
from ctxstore.engine.core import EngineCore
from ctxstore.engine.streamed import (
    AsyncStreamedTurn,
    StreamedTurn,
    StreamedTurnPlan,
    StreamOptions,
)
from ctxstore.engine.turns import AsyncTurn, Turn
from ctxstore.messages.tokens import TokenCounter, loaded
from ctxstore.models import (
    BranchInfo,
    ChatMeta,
    CheckpointInfo,
    ConflictPolicy,
    MessageFormat,
    ResolveResult,
    SavedHead,
)
from ctxstore.prompt.fragment import Await, Fragment, await_on_private_loop, awaited
from ctxstore.prompt.renderers import Renderer
from ctxstore.store.async_store import AsyncStore
from ctxstore.store.scoped import AsyncUserStore, UserStore, acting_as
from ctxstore.store.sync_store import Store
from ctxstore.window.manager import ContextManager
from ctxstore.window.summarizer import asummarizing, summarizing

StoreT = TypeVar("StoreT", Store, AsyncStore)
T = TypeVar("T")


class _EngineBase(Generic[StoreT]):
    """What both engines share: construction, read-only properties, render()."""

    _store_type: type[Store] | type[AsyncStore]

    def __init__(
        self,
        *,
        store: StoreT | UserStore | AsyncUserStore,
        chat_id: str,
        user_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        on_conflict: ConflictPolicy = "rebase",
        model: str | None = None,
        estimate_tokens: TokenCounter | None = None,
        context_manager: ContextManager | None = None,
        message_format: MessageFormat | None = None,
    ) -> None:
        runs_on, acting = acting_as(type(self).__name__, store, user_id, self._store_type)
        self._store: StoreT = runs_on
        self._core = EngineCore(
            runs_on.state,
            chat_id=chat_id,
            user_id=acting or "",
            metadata=metadata,
            on_conflict=on_conflict,
            model=model,
            estimate_tokens=estimate_tokens,
            context_manager=context_manager,
            message_format=message_format,
        )

    @property
    def chat_id(self) -> str:
        """The chat this engine works on."""
        return self._core.session.chat_id

    @property
    def user_id(self) -> str:
        """The user the engine acts for (the chat's owner)."""
        return self._core.session.user_id

    @property
    def message_format(self) -> MessageFormat:
        """The form of the messages the engine writes itself: ``"ui"`` (AI SDK UI messages)
        or ``"model"`` (chat-completions); unless given, what the first pending message is."""
        return self._core.message_format

    @property
    def branch(self) -> str:
        """The branch this engine works on: ``"main"`` until the chat is opened."""
        return self._core.session.branch

    @property
    def head_message_id(self) -> str | None:
        """The head of the branch as this engine last saw it; None before any message."""
        return self._core.session.head

    @property
    def chat(self) -> ChatMeta | None:
        """The chat's fields as last read or written; None before the chat is opened."""
        return self._core.session.chat

    @property
    def pending(self) -> tuple[Fragment, ...]:
        """Message fragments set but not saved yet."""
        return tuple(self._core.prompt.pending)

    @property
    def context(self) -> tuple[Fragment, ...]:
        """The context fragments the system prompt is rendered from."""
        return self._core.prompt.context

    def render(self, renderer: Renderer | None = None) -> str:
        """The system prompt alone, no I/O (lazy data must be materialized: see resolve())."""
        run_plan(self._core.prompt.materialize(), performer(handle=await_on_private_loop))
        return self._core.prompt.render(renderer)


class ContextEngine(_EngineBase[Store]):
    """The context of one chat for one user, on a sync :class:`~ctxstore.Store`."""

    _store_type = Store

    @functools.cached_property
    def _perform(self) -> Perform:
        """The steps of this engine's plans: store operations, and its effects: lazy context
        data awaited on a private event loop, the manager's summaries."""
        summarize = summarizing(self._core.summarize)

        def effect(request: Any) -> Any:
            if isinstance(request, Await):
                return await_on_private_loop(request)
            return summarize(request)

        return performer(self._store.run, effect)

    def set(self, *fragments: Fragment) -> ContextEngine:
        """Add fragments: messages are queued for save(), the rest join the context."""
        self._core.set(fragments)
        return self

    def resolve(
        self,
        renderer: Renderer | None = None,
        *,
        max_tokens: int | None = None,
        max_messages: int | None = None,
        full: bool = False,
    ) -> ResolveResult:
        """The system prompt and the messages (persisted chain, then pending): one round trip.

        The chain starts after its newest summary (whose text joins the system prompt) unless
        ``full``; ``max_tokens`` / ``max_messages`` keep only the newest messages within that
        budget (the summary counts, the rendered fragments do not; a tool call is never cut
        from its results; when nothing fits, the newest message comes with its tool group).
        """
        plan = self._core.resolve_plan(max_tokens, max_messages, full)
        with self._core.traced("resolve"):
            return self._core.resolved(run_plan(plan, self._perform), renderer)

    def inspect(self, model: str | None = None, renderer: Renderer | None = None) -> dict[str, Any]:
        """A JSON-serializable snapshot of the next call: token and cost estimate with the
        model's limits, the rendered prompt, the fragments, the chat's graph, the time."""
        operation = self._core.inspect_op(model, renderer)
        return run_plan(self._core.materialized(operation), self._perform)

    def token_count(self, renderer: Renderer | None = None) -> int:
        """The tokens the next ``resolve()`` would send (system prompt, summary, messages,
        pending ones), from the counts stored at save: one round trip, no payload read."""
        operation = self._core.token_count_op(renderer)
        return run_plan(self._core.materialized(operation), self._perform)

    def save(self, *, request_id: str | None = None) -> SavedHead | None:
        """Persist the pending messages (one round trip); returns the new head, which also says
        where the save went (``.branch``, ``.forked_at``: see :class:`SavedHead`).

        Safe to retry: without ``request_id`` the engine makes one for the pending messages
        and keeps it until a save of them succeeds, so ``try: engine.save() except
        BackendTimeoutError: engine.save()`` saves once (add nothing in between). With
        ``request_id`` (see ``Store.append``), that id is the write's, for a retry that comes
        from a new engine (another process, a function invoked again)."""
        with self._core.traced("save"):
            return self._core.noted_save(self._store.run(self._core.save_op(request_id=request_id)))

    def turn(
        self,
        strategy: TurnStrategy = "reject",
        *,
        lease: float | timedelta = 30.0,
        wait: float | timedelta = 10.0,
    ) -> Turn:
        """A turn holding the chat's lease (a context manager): its writes carry a fencing
        token that another turn's lease makes stale. A second turn on a busy chat:
        ``"reject"`` raises ``ChatBusyError`` at once, ``"enqueue"`` waits up to ``wait``
        seconds, ``"interrupt"`` takes the chat over (the old turn's writes raise
        ``LeaseLostError``). ``lease``: seconds the lease lasts (``turn.extend()`` runs it on)."""
        return Turn(self._store, self._core, strategy, lease, wait)

    def rewind(self, message_id: str) -> BranchInfo:
        """Branch at ``message_id`` and work there; pending messages are dropped."""
        return self._store.run(self._core.rewind_op(message_id))

    def btw(self) -> BranchInfo:
        """A side branch at the current head, not activated; pending messages are kept."""
        return self._store.run(self._core.btw_op())

    def switch_branch(self, name: str) -> BranchInfo:
        """Activate ``name`` and work there; pending messages are dropped."""
        return self._store.run(self._core.switch_branch_op(name))

    def switch_to_version(self, message_id: str) -> BranchInfo:
        """Activate the newest branch that holds ``message_id`` (a version of a message: see
        ``Store.message_versions``) and work there; pending messages are dropped."""
        return self._store.run(self._core.switch_to_version_op(message_id))

    def checkpoint(self, name: str) -> CheckpointInfo:
        """Name the current head."""
        return self._store.run(self._core.checkpoint_op(name))

    def restore(self, name: str) -> BranchInfo:
        """Rewind to a checkpoint's message."""
        return self._store.run(self._core.restore_op(name))

    def update_chat(
        self, *, title: str | None = None, metadata: Mapping[str, Any] | None = None
    ) -> ChatMeta:
        """Replace the title, shallow-merge metadata."""
        return self._store.run(self._core.update_chat_op(title, metadata))

    def track_usage(self, usage: Mapping[str, Any] | object) -> dict[str, int]:
        """Add an LLM call's token usage to ``chat.metadata["usage"]``; returns the totals."""
        return self._store.run(self._core.track_usage_op(usage))

    def stream_turn(
        self,
        model: str,
        *,
        renderer: Renderer | None = None,
        title: bool = True,
        title_model: str | None = None,
        title_options: Mapping[str, Any] | None = None,
        stream_ttl: float | timedelta = DEFAULT_STREAM_TTL,
        writer_ttl: float | timedelta = DEFAULT_WRITER_TTL,
        **litellm_kwargs: Any,
    ) -> StreamedTurn:
        """Resolve, start the answer's stream, call ``litellm.completion(stream=True)``; iterate
        the result for the chunks. At the end the pending messages and the answer are saved in
        one append, the usage tracked, and on the chat's first turn a title set (``title_model``,
        default ``model``; ``title_options`` go to that call). The text is mirrored into Redis
        for ``store.read_stream`` until ``stream_ttl`` after the end; a stream whose writer wrote
        nothing for ``writer_ttl`` counts as stopped. An error or a stop saves nothing."""
        options = StreamOptions.of(
            stream_ttl=stream_ttl,
            writer_ttl=writer_ttl,
            title=title,
            title_model=title_model,
            title_options=title_options,
        )
        plan = StreamedTurnPlan(self._core, model, options, litellm_kwargs)
        return StreamedTurn.start(self._store, plan, self.resolve(renderer))

    def active_stream(self) -> str | None:
        """The stream id of an answer being streamed on this engine's branch, or None."""
        return self._store.run(self._core.active_stream_op())


@documented_by(ContextEngine)
class AsyncContextEngine(_EngineBase[AsyncStore]):
    """The context of one chat for one user, on an :class:`~ctxstore.AsyncStore`."""

    _store_type = AsyncStore

    @functools.cached_property
    def _perform(self) -> AsyncPerform:
        """The steps of this engine's plans: store operations awaited, lazy context data awaited
        on the running loop, the manager's summaries (a sync summarizer in a thread)."""
        summarize = asummarizing(self._core.asummarize)

        def effect(request: Any) -> Any:
            if isinstance(request, Await):
                return awaited(request)
            return summarize(request)

        return aperformer(self._run, effect)

    async def _run(self, operation: Operation[T]) -> T:
        """Run an operation on the store, the engine's tokenizer loaded first: the operations
        that count (a save, a budget, a size) count before their first round trip, and the
        first load reads tiktoken's tables, which a worker thread does while the loop serves."""
        await loaded(self._core.count_message)
        return await self._store.run(operation)

    def set(self, *fragments: Fragment) -> AsyncContextEngine:
        """The async form of :meth:`ContextEngine.set`."""
        self._core.set(fragments)
        return self

    async def resolve(
        self,
        renderer: Renderer | None = None,
        *,
        max_tokens: int | None = None,
        max_messages: int | None = None,
        full: bool = False,
    ) -> ResolveResult:
        """The async form of :meth:`ContextEngine.resolve`."""
        plan = self._core.resolve_plan(max_tokens, max_messages, full)
        with self._core.traced("resolve"):
            return self._core.resolved(await arun_plan(plan, self._perform), renderer)

    async def inspect(
        self, model: str | None = None, renderer: Renderer | None = None
    ) -> dict[str, Any]:
        """The async form of :meth:`ContextEngine.inspect`."""
        operation = self._core.inspect_op(model, renderer)
        return await arun_plan(self._core.materialized(operation), self._perform)

    async def token_count(self, renderer: Renderer | None = None) -> int:
        """The async form of :meth:`ContextEngine.token_count`."""
        operation = self._core.token_count_op(renderer)
        return await arun_plan(self._core.materialized(operation), self._perform)

    async def save(self, *, request_id: str | None = None) -> SavedHead | None:
        """The async form of :meth:`ContextEngine.save`."""
        with self._core.traced("save"):
            return self._core.noted_save(await self._run(self._core.save_op(request_id=request_id)))

    def turn(
        self,
        strategy: TurnStrategy = "reject",
        *,
        lease: float | timedelta = 30.0,
        wait: float | timedelta = 10.0,
    ) -> AsyncTurn:
        """The async form of :meth:`ContextEngine.turn`."""
        return AsyncTurn(self._store, self._core, strategy, lease, wait)

    async def rewind(self, message_id: str) -> BranchInfo:
        """The async form of :meth:`ContextEngine.rewind`."""
        return await self._store.run(self._core.rewind_op(message_id))

    async def btw(self) -> BranchInfo:
        """The async form of :meth:`ContextEngine.btw`."""
        return await self._store.run(self._core.btw_op())

    async def switch_branch(self, name: str) -> BranchInfo:
        """The async form of :meth:`ContextEngine.switch_branch`."""
        return await self._store.run(self._core.switch_branch_op(name))

    async def switch_to_version(self, message_id: str) -> BranchInfo:
        """The async form of :meth:`ContextEngine.switch_to_version`."""
        return await self._store.run(self._core.switch_to_version_op(message_id))

    async def checkpoint(self, name: str) -> CheckpointInfo:
        """The async form of :meth:`ContextEngine.checkpoint`."""
        return await self._store.run(self._core.checkpoint_op(name))

    async def restore(self, name: str) -> BranchInfo:
        """The async form of :meth:`ContextEngine.restore`."""
        return await self._store.run(self._core.restore_op(name))

    async def update_chat(
        self, *, title: str | None = None, metadata: Mapping[str, Any] | None = None
    ) -> ChatMeta:
        """The async form of :meth:`ContextEngine.update_chat`."""
        return await self._store.run(self._core.update_chat_op(title, metadata))

    async def track_usage(self, usage: Mapping[str, Any] | object) -> dict[str, int]:
        """The async form of :meth:`ContextEngine.track_usage`."""
        return await self._store.run(self._core.track_usage_op(usage))

    async def stream_turn(
        self,
        model: str,
        *,
        renderer: Renderer | None = None,
        title: bool = True,
        title_model: str | None = None,
        title_options: Mapping[str, Any] | None = None,
        stream_ttl: float | timedelta = DEFAULT_STREAM_TTL,
        writer_ttl: float | timedelta = DEFAULT_WRITER_TTL,
        **litellm_kwargs: Any,
    ) -> AsyncStreamedTurn:
        """The async form of :meth:`ContextEngine.stream_turn`."""
        options = StreamOptions.of(
            stream_ttl=stream_ttl,
            writer_ttl=writer_ttl,
            title=title,
            title_model=title_model,
            title_options=title_options,
        )
        plan = StreamedTurnPlan(self._core, model, options, litellm_kwargs)
        return await AsyncStreamedTurn.start(self._store, plan, await self.resolve(renderer))

    async def active_stream(self) -> str | None:
        """The async form of :meth:`ContextEngine.active_stream`."""
        return await self._store.run(self._core.active_stream_op())
