"""The context engine's logic, without I/O, shared by ContextEngine and AsyncContextEngine.

An engine holds two things, each an object of its own: a :class:`~ctxstore.engine.
prompt_buffer.PromptBuffer` (context fragments for the system prompt, pending messages for the
next save) and a :class:`~ctxstore.engine.session.ChatSession` (where it stands in the chat:
branch, head, anchor, turn, what the last read found). :class:`EngineCore` joins them to the
store: each method that talks to Redis is an *operation* (a generator of store calls from
:mod:`ctxstore._core`) or a *plan* (:mod:`ctxstore._base.plans`: materializing lazy context,
an inline compaction, taking a turn), which the sync and async engines drive; every outcome is
reported to the session through a named transition.

The first operation of an engine opens the chat (upsert, owner check, the constructor metadata
merged once, the active branch loaded) in the same script as its own work where it can:
``resolve()`` opens and reads the conversation in one round trip.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace
from typing import Any, TypeVar, get_args

from ctxstore._base.ids import check_key_id, check_name
from ctxstore._base.plans import Plan, Run
from ctxstore._core import telemetry
from ctxstore._core.cache import EMPTY_CHAIN, CachedChain
from ctxstore._core.ops import append as append_ops
from ctxstore._core.ops import branches, chats, checkpoints, opening, reads, turns, versions
from ctxstore._core.ops import graph as graph_ops
from ctxstore._core.ops import streams as answer_stream
from ctxstore._core.ops.chats import metadata_args
from ctxstore._core.protocol import Operation
from ctxstore._core.state import StoreState
from ctxstore.engine.inspection import snapshot
from ctxstore.engine.prompt_buffer import PromptBuffer
from ctxstore.engine.session import ChatSession, Scope
from ctxstore.engine.titles import static_chat_title
from ctxstore.errors import ConfigurationError, LeaseLostError, NotFoundError
from ctxstore.messages.tokens import MessageCounter, TokenCounter, message_counter
from ctxstore.models import (
    BranchInfo,
    ChainSize,
    ChatMeta,
    CheckpointInfo,
    CompactionTrigger,
    ConflictPolicy,
    MessageFormat,
    NewMessage,
    ResolveResult,
    SavedHead,
)
from ctxstore.prompt.fragment import Fragment
from ctxstore.prompt.messages import message_payload, replaces_last_assistant, stored_metadata
from ctxstore.prompt.renderers import Renderer
from ctxstore.ui.parts import is_ui_message
from ctxstore.window.compaction import CompactionPolicy, CompactionResult, compaction
from ctxstore.window.manager import ContextManager

T = TypeVar("T")


class EngineCore:
    """One engine on one chat: its prompt buffer, its session, and the operations that join
    them to the store. Not safe to share between tasks."""

    def __init__(
        self,
        state: StoreState,
        *,
        chat_id: str,
        user_id: str,
        metadata: Mapping[str, Any] | None,
        on_conflict: ConflictPolicy,
        model: str | None = None,
        estimate_tokens: TokenCounter | None = None,
        context_manager: ContextManager | None = None,
        message_format: MessageFormat | None = None,
    ) -> None:
        self._state = state
        if message_format not in (None, *get_args(MessageFormat)):
            raise ConfigurationError(
                f"message_format must be 'model' or 'ui' (or None), got {message_format!r}"
            )
        self._message_format = message_format
        if context_manager is not None and not isinstance(context_manager, ContextManager):
            raise ConfigurationError(
                f"context_manager must be a ContextManager, got {type(context_manager).__name__}"
            )
        #: The window policy: saves past its soft threshold enqueue a compaction job, resolves
        #: past its hard threshold compact first.
        self.manager = context_manager
        if model is None and context_manager is not None:
            model = context_manager.model
        if estimate_tokens is None and context_manager is not None:
            estimate_tokens = context_manager.estimate_tokens
        #: The model whose tokenizer counts this engine's messages (None: ``o200k_base``).
        self.model = model
        self.count_message: MessageCounter = message_counter(model, estimate_tokens)
        append_ops.check_policy(on_conflict, get_args(ConflictPolicy), "on_conflict")
        self.on_conflict: ConflictPolicy = on_conflict
        metadata_args(metadata, state)  # refuse bad metadata now, not at the first call
        self._initial_metadata = dict(metadata) if metadata else None
        self.prompt = PromptBuffer(self.count_message)
        self.session = ChatSession(
            check_key_id(chat_id, "chat_id"), check_key_id(user_id, "user_id")
        )

    @property
    def chat_id(self) -> str:
        return self.session.chat_id

    @property
    def message_format(self) -> MessageFormat:
        """The form of the messages the engine writes itself (a streamed turn's answer):
        ``"ui"`` (AI SDK UI messages) or ``"model"`` (chat-completions messages). Unless the
        engine was given one, what the first pending message is."""
        if self._message_format is not None:
            return self._message_format
        pending = self.prompt.pending
        return "ui" if pending and is_ui_message(pending[0].data) else "model"

    @property
    def store_state(self) -> StoreState:
        """The store's key names, limits and clock, for the operations of a streamed turn
        (:mod:`ctxstore.engine.streamed`)."""
        return self._state

    @property
    def _scope(self) -> Scope:
        return self.session.scope

    @property
    def _write_scope(self) -> Scope:
        return self.session.write_scope

    # --- the prompt --------------------------------------------------------------------------

    def set(self, fragments: Iterable[Fragment]) -> None:
        """Queue message fragments; add the others to the context. Both are copied."""
        self.prompt.add(fragments)

    def materialized(self, operation: Operation[T]) -> Plan[T]:
        """``operation`` run once the context's lazy data is materialized (it renders)."""
        yield from self.prompt.materialize()
        result: T = yield Run(operation)
        return result

    def traced(self, name: str) -> AbstractContextManager[Any]:
        """The span of the engine's ``name`` (``ctxstore engine.resolve``...): the store
        operations it runs are its children."""
        if not telemetry.tracing():
            return nullcontext()
        return telemetry.span(
            f"ctxstore engine.{name}", telemetry.chat_attributes(self._state, self.chat_id)
        )

    def noted_save(self, saved: SavedHead | None) -> SavedHead | None:
        """``saved``, told to the current span (the engine's save): how many messages, and
        whether they went onto a new side branch."""
        telemetry.annotate(
            {
                "ctxstore.messages": len(saved.message_ids) if saved is not None else 0,
                "ctxstore.forked": saved is not None and saved.forked,
            }
        )
        return saved

    def resolved(self, chain: CachedChain, renderer: Renderer | None) -> ResolveResult:
        """The prompt and the messages: the chain's payloads, then copies of the pending
        messages, all the caller's (the chain's are copied from the process cache as they are
        handed out, see :class:`~ctxstore._base.owned.OwnedList`). The newest summary, when the
        read stopped at one, goes into the system prompt. UI messages reach ``messages``
        converted for the model; ``ui_messages`` is built from them when asked."""
        summary = self.session.summary
        pending = self.prompt.pending
        messages = chain.payloads(self.prompt.pending_payloads())
        holds_ui = chain.first_ui >= 0 or any(is_ui_message(item.data) for item in pending)
        pending_ids = [item.id or f"pending-{n}" for n, item in enumerate(pending)]

        def ids() -> list[str]:  # only when ui_messages is read: no copy of the chain before
            return [message["id"] for message in chain.read_only_messages()] + pending_ids

        system_prompt = self.prompt.system_prompt(renderer, summary)
        telemetry.annotate({"ctxstore.messages": len(messages), "ctxstore.summary": bool(summary)})
        return ResolveResult.of(
            system_prompt, messages, ids, summary, self.session.versions, holds_ui=holds_ui
        )

    # --- opening -------------------------------------------------------------------------------

    def open_op(self, *, load: bool, whole: bool = True) -> Operation[CachedChain | None]:
        """Upsert the chat as its owner, merge the constructor metadata once, load the branch.

        ``whole=False``: load it only when the chat has no summary (None otherwise: the caller
        reads from the newest summary on)."""
        opened, chain, forked = yield from opening.open_chat_op(
            self._state,
            self.session.chat_id,
            self.session.user_id,
            self._initial_metadata,
            load=load,
            unless_summarized=not whole,
        )
        self._initial_metadata = None
        self.session.opened_chat(opened.chat, opened.branch)
        self.session.forked = forked
        if chain is None:
            return EMPTY_CHAIN if not load else None
        found = yield from self._versions_if_forked(forked)
        self.session.read_chain(opened.branch, chain, None, self.session.context_tokens, found)
        return chain

    def _versions_if_forked(self, forked: bool) -> Operation[dict[str, tuple[int, int]] | None]:
        """The versions on the branch's chain, in a round trip of their own, when the chat
        may have forks and the read did not ask for them (an engine's first read of it): a
        chat without forks has none, and costs nothing more."""
        if not forked:
            return None
        found: dict[str, tuple[int, int]] = yield versions.chain_versions_call(
            self._state, self.chat_id, self.session.branch, **self._scope
        )
        return found

    def ensure_open(self) -> Operation[None]:
        if not self.session.opened:
            yield from self.open_op(load=False)

    # --- reading and saving ----------------------------------------------------------------

    def resolve_op(
        self,
        *,
        max_tokens: int | None = None,
        max_messages: int | None = None,
        full: bool = False,
    ) -> Operation[CachedChain]:
        """The branch's chain as it is in Redis now (another worker may have moved the head),
        from the newest summary on unless ``full``, cut to the newest messages within
        ``max_tokens`` / ``max_messages``; what the process cache holds is not read again. One
        round trip; the first call of an engine takes two when the chat has a summary or a
        budget is given (opening the chat, then the read).

        A budget is for the whole call: ``max_tokens`` counts the summary, the reply priming
        and the pending messages (which are always sent) besides the stored ones, and
        ``max_messages`` the pending ones too, so what ``resolve()`` returns counts at most that
        by the store's own counter. The one exception, documented: when nothing fits, the
        newest message comes with its tool group; with pending messages that is them alone."""
        budget = self.prompt.budget_for_chain(max_tokens, max_messages)
        window = reads.Window(
            max_tokens=budget.tokens, max_messages=budget.messages, after_summary=not full
        )
        # A UI shows "< 2/3 >" beside a message with versions: a chat that may have forks sends
        # the versions' script beside the read (one round trip); one without has none.
        with_versions = self.message_format == "ui" or self.session.forked
        # a manager needs the stored size, versions their own script: the read does both
        plain = not window.cuts and self.manager is None and not with_versions
        if not self.session.opened:
            opened = yield from self.open_op(load=plain, whole=full)
            if opened is not None and plain:
                return opened
        info, chain, reply = yield from reads.read_branch(
            self._state,
            self.chat_id,
            self.session.branch,
            window=window,
            versions=with_versions,
            **self._scope,
        )
        summary = reads.branch_summary(self._state, self.chat_id, reply)
        self.session.forked = reply.forked
        if reply.versions is None and reply.forked:
            reply = replace(reply, versions=(yield from self._versions_if_forked(True)))
        if budget.over(reply.kept_tokens + (summary["tokens"] if summary is not None else 0)):
            chain = EMPTY_CHAIN  # the newest stored message alone did not fit beside the pending
        self.session.read_chain(info, chain, summary, reply.context_tokens, reply.versions)
        return chain

    def resolve_plan(
        self, max_tokens: int | None, max_messages: int | None, full: bool
    ) -> Plan[CachedChain]:
        """A resolve, with the inline compaction a manager's hard threshold calls for: read; if
        the context is past it, compact under the chat's lease and read again (within the
        threshold if another summarizer held the chat). Lazy context data is materialized
        first; the engines answer its effects (awaits, the manager's summarizer)."""
        yield from self.prompt.materialize()
        chain: CachedChain = yield Run(
            self.resolve_op(max_tokens=max_tokens, max_messages=max_messages, full=full)
        )
        if not self.compaction_due(full):
            return chain
        result = yield from self.compaction_steps()
        budget = self.window_after(result, max_tokens)
        again: CachedChain = yield Run(
            self.resolve_op(max_tokens=budget, max_messages=max_messages)
        )
        return again

    def compaction_due(self, full: bool) -> bool:
        """Whether the context just read is past the manager's hard threshold (compact inline
        before the LLM call)."""
        context = self.session.context_tokens
        return (
            not full
            and self.manager is not None
            and context >= self.manager.hard_tokens
            and context >= 0
        )

    def compaction_steps(self) -> Plan[CompactionResult]:
        """One inline compaction of the engine's branch, under the chat's lease."""
        assert self.manager is not None
        policy = CompactionPolicy(
            min_recent_messages=self.manager.min_recent_messages,
            summary_model=self.manager.summary_model,
        )
        return compaction(
            self._state,
            self.chat_id,
            self.session.branch,
            policy,
            self.count_message,
            **self._scope,
        )

    def summarize(self, messages: list[dict[str, Any]]) -> str:
        """The manager's summarizer (only a resolve past its hard threshold calls it)."""
        if self.manager is None:
            raise ConfigurationError("this engine has no context_manager to summarize with")
        return self.manager.summarize(messages)

    async def asummarize(self, messages: list[dict[str, Any]]) -> str:
        if self.manager is None:
            raise ConfigurationError("this engine has no context_manager to summarize with")
        return await self.manager.asummarize(messages)

    def window_after(self, result: CompactionResult, max_tokens: int | None) -> int | None:
        """The token budget of the read after an inline compaction: the caller's; and when
        another summarizer held the chat (nothing was compacted), no more than the hard
        threshold, so the call fits the window all the same."""
        if self.manager is None or result.skipped is None:
            return max_tokens
        limit = self.manager.hard_tokens
        return limit if max_tokens is None else min(max_tokens, limit)

    def _trigger(self) -> CompactionTrigger | None:
        if self.manager is None:
            return None
        return CompactionTrigger(
            soft_tokens=self.manager.soft_tokens,
            min_recent_messages=self.manager.min_recent_messages,
        )

    def _size_op(self) -> Operation[ChainSize]:
        """The branch's stored size from its newest summary on (the summary itself comes back
        too, for the system prompt): one round trip, no message payload."""
        yield from self.ensure_open()
        info, _chain, reply = yield from reads.read_branch(
            self._state,
            self.chat_id,
            self.session.branch,
            window=reads.Window(count_only=True, after_summary=True),
            **self._scope,
        )
        self.session.read_size(info, reads.branch_summary(self._state, self.chat_id, reply))
        return ChainSize(reply.length, reply.tokens, reply.context_tokens, None)

    def inspect_op(self, model: str | None, renderer: Renderer | None) -> Operation[dict[str, Any]]:
        """A JSON-serializable snapshot of what the next call would send and what it costs
        (see :func:`ctxstore.engine.inspection.snapshot`): two round trips (the chain's size,
        the chat's graph), no message payload read."""
        size = yield from self._size_op()
        chat_graph = yield from graph_ops.get_graph(self._state, self.chat_id, **self._scope)
        chosen = model if model is not None else self.model
        counter = self.count_message if chosen == self.model else message_counter(chosen)
        return snapshot(self.prompt, self.session, size, chat_graph, chosen, counter, renderer)

    def token_count_op(self, renderer: Renderer | None) -> Operation[int]:
        """The tokens the next ``resolve()`` would send given what is stored now: one round
        trip, no payload (the summary's text comes back for the system prompt's count)."""
        size = yield from self._size_op()
        return self.prompt.count(size.context_tokens, self.session.summary, renderer)

    def save_op(
        self, *, title: bool = True, request_id: str | None = None
    ) -> Operation[SavedHead | None]:
        """Persist the pending messages in one append; returns the new head.

        ``request_id``: the caller's id of this write (see ``Store.append``). Without one the
        engine makes one for the pending messages and keeps it until a save of them succeeds,
        so a save retried after a timeout or a lost connection is applied once (add nothing
        before the retry: other messages are another write).

        A pending message whose id exists in the chat is an edit: the store forks a branch at
        that message's parent (activated) and stores it there under a new id. A
        ``last_assistant_message`` becomes such an edit of the branch's last assistant message.

        With ``on_conflict="rebase"`` (the default), the engine's own last saved message is its
        anchor: when another turn's message has come after it since, the save goes onto a new
        branch from the anchor (not activated) and the engine moves there, so an answer never
        lands after another turn's message. Before its first save, an engine rebases onto the
        head. A turn's write refused for a lost lease keeps the pending messages; the next save
        outside the turn puts them on a side branch from the anchor. A chat without a title
        takes the static title of the first pending user message in the same append, unless
        ``title`` is False.
        """
        session, pending = self.session, self.prompt.pending
        yield from self.ensure_open()
        if not pending:
            return None if session.head is None else SavedHead(session.head, branch=session.branch)
        if not session.knows_last_assistant and any(map(replaces_last_assistant, pending)):
            yield from self.resolve_op()
        aside = session.lease_lost and session.turn is None
        start = session.anchor if session.anchor is not None else session.head
        if aside and start is not None:
            side: BranchInfo = yield from branches.create_branch(
                self._state,
                self.chat_id,
                start,
                base=session.branch,
                activate=False,
                **self._scope,
            )
            session.stepped_aside(side, start)
        expected, policy = session.head, self.on_conflict
        if policy == "rebase" and session.anchor is not None:
            expected, policy = session.anchor, "fork"
        items = [self._as_new_message(item) for item in pending]
        chat_title = self._static_title() if title and session.untitled() else None
        request, recall = self.prompt.request_for_pending(request_id)
        try:
            result = yield from append_ops.append(
                self._state,
                self.chat_id,
                session.branch,
                items,
                expected_head=expected,
                on_conflict=policy,
                on_existing="fork",
                count_tokens=self.count_message,
                compaction=self._trigger(),
                title_if_none=chat_title,
                request_id=request,
                recall=recall,
                **self._write_scope,
            )
        except LeaseLostError:
            session.lost_lease()
            raise
        if chat_title is not None:
            session.titled(chat_title)
        assistants = [
            stored_id
            for stored_id, item in zip(result.message_ids, pending, strict=True)
            if item.data.get("role") == "assistant"
        ]
        session.saved(result, assistants)
        self.prompt.drop_pending()
        forked_at = expected if result.conflict_fork is not None else None
        if aside:
            forked_at = start
        return SavedHead(
            result.head_message_id,
            branch=result.branch,
            message_ids=result.message_ids,
            forked_at=forked_at,
            resent=result.resent,
        )

    def _static_title(self) -> str | None:
        """The title a save gives a chat that has none (whatever its branch holds already):
        the static title of the first pending user message; None without one."""
        question = next((item for item in self.prompt.pending if item.name == "user"), None)
        return None if question is None else static_chat_title(question)

    def _as_new_message(self, item: Fragment) -> NewMessage:
        metadata = stored_metadata(item)
        if replaces_last_assistant(item):
            last = self.session.last_assistant_id()
            if last is not None:
                return NewMessage(message_payload(item), id=last, metadata=metadata)
        return NewMessage(message_payload(item), id=item.id, metadata=metadata)

    # --- turns -------------------------------------------------------------------------------

    def begin_turn(
        self, strategy: turns.TurnStrategy, lease: float, wait: float
    ) -> Plan[turns.TurnGrant]:
        """Open the chat, then take its turn lease by ``strategy`` (a plan: "enqueue" pauses
        between looks); the engine's writes carry the fence until :meth:`end_turn_op`."""
        if self.session.turn is not None:
            raise ConfigurationError("this engine is already in a turn; turns do not nest")
        yield Run(self.ensure_open())
        token = turns.new_turn_token()
        grant = yield from turns.acquire(
            self._state,
            self.chat_id,
            token,
            strategy,
            lease_ms=turns.milliseconds(lease),
            wait=wait,
            **self._scope,
        )
        computed = any(item.data.get("role") != "user" for item in self.prompt.pending)
        self.session.began_turn(grant, token, computed_before=computed)
        return grant

    def extend_turn_op(self, lease: float) -> Operation[turns.TurnGrant]:
        """Run the turn's lease ``lease`` seconds from now (``LeaseLostError`` if it is gone)."""
        if self.session.turn is None:
            raise ConfigurationError("extend() is for a turn in progress")
        try:
            grant = yield from turns.extend_turn(
                self._state,
                self.chat_id,
                self.session.turn_token,
                turns.milliseconds(lease),
                **self._scope,
            )
        except LeaseLostError:
            self.session.lost_lease()
            raise
        self.session.extended_turn(grant)
        return grant

    def end_turn_op(self) -> Operation[bool]:
        """Leave the turn (writes no longer carry its fence) and give the lease back if it is
        still this turn's; True when it was."""
        token = self.session.ended_turn()
        if not token:
            return False
        given: bool = yield from turns.give_turn(self._state, self.chat_id, token, **self._scope)
        return given

    # --- branches and checkpoints ------------------------------------------------------------

    def rewind_op(self, message_id: str) -> Operation[BranchInfo]:
        """A new branch at ``message_id``, activated; pending messages are dropped."""
        check_name(message_id, "message_id")
        info: BranchInfo = yield from self._move_to(
            lambda: branches.create_branch(
                self._state,
                self.chat_id,
                message_id,
                base=self.session.branch,
                activate=True,
                **self._write_scope,
            )
        )
        return info

    def restore_op(self, name: str) -> Operation[BranchInfo]:
        """Exactly a rewind to the checkpoint's message, read and branched in one script."""
        info: BranchInfo = yield from self._move_to(
            lambda: branches.branch_from_checkpoint(
                self._state,
                self.chat_id,
                name,
                base=self.session.branch,
                activate=True,
                **self._write_scope,
            )
        )
        return info

    def _move_to(self, branch_op: Callable[[], Operation[BranchInfo]]) -> Operation[BranchInfo]:
        """Open the chat, run ``branch_op`` (built after opening: it names the current branch),
        then work on the branch it returns, without the pending messages of the old one."""
        yield from self.ensure_open()
        info: BranchInfo = yield from branch_op()
        self.session.moved(info)
        self.prompt.drop_pending()
        return info

    def btw_op(self) -> Operation[BranchInfo]:
        """A side branch at the current head, not activated; the engine stays where it is."""
        yield from self.ensure_open()
        info: BranchInfo = yield from branches.create_branch(
            self._state,
            self.chat_id,
            self.session.saved_head("btw"),
            base=self.session.branch,
            activate=False,
            **self._write_scope,
        )
        return info

    def switch_branch_op(self, name: str) -> Operation[BranchInfo]:
        """Activate ``name`` and work on it; pending messages are dropped."""
        info: BranchInfo = yield from self._move_to(
            lambda: branches.set_active_branch(self._state, self.chat_id, name, **self._write_scope)
        )
        return info

    def switch_to_version_op(self, message_id: str) -> Operation[BranchInfo]:
        """Activate the newest branch whose chain holds ``message_id`` (one of the versions a
        chat UI pages through) and work there; pending messages are dropped."""
        yield from self.ensure_open()
        found = yield from versions.message_versions(
            self._state, self.chat_id, message_id, **self._scope
        )
        holders = next(version.branches for version in found if version.id == message_id)
        if not holders:
            raise NotFoundError(
                f"no branch holds message {message_id!r}: rewind to it to start one",
                what="branch",
                id=message_id,
            )
        return (yield from self.switch_branch_op(holders[-1]))

    def checkpoint_op(self, name: str) -> Operation[CheckpointInfo]:
        """Name the current head; an existing checkpoint of that name moves here."""
        yield from self.ensure_open()
        info: CheckpointInfo = yield from checkpoints.upsert_checkpoint(
            self._state,
            self.chat_id,
            name,
            self.session.saved_head("checkpoint"),
            **self._write_scope,
        )
        return info

    # --- the chat --------------------------------------------------------------------------

    def update_chat_op(
        self, title: str | None, metadata: Mapping[str, Any] | None
    ) -> Operation[ChatMeta]:
        yield from self.ensure_open()
        chat = yield from chats.update_chat(
            self._state, self.chat_id, title=title, metadata=metadata, **self._write_scope
        )
        self.session.chat_changed(chat)
        return chat

    def track_usage_op(self, usage: Mapping[str, Any] | object) -> Operation[dict[str, int]]:
        """Add token usage (a dict, or a litellm / OpenAI usage object) to the chat's totals."""
        yield from self.ensure_open()
        totals: dict[str, int] = yield from chats.add_usage(
            self._state, self.chat_id, usage, **self._write_scope
        )
        chat = self.session.chat
        if chat is not None:
            metadata = {**chat.metadata, "usage": totals}
            self.session.chat_changed(chat.model_copy(update={"metadata": metadata}))
        return totals

    # --- answer streams ----------------------------------------------------------------------

    def stream_scope(self, *, fenced: bool) -> Scope:
        """What a streamed turn's calls carry: with ``fenced``, the turn's fence too (the
        writes of its answer); without, only user and incarnation (marking the stream failed
        must work after the turn lost its lease)."""
        return self._write_scope if fenced else self._scope

    def active_stream_op(self) -> Operation[str | None]:
        """The stream id of the answer being streamed on this engine's branch, or None."""
        yield from self.ensure_open()
        found: str | None = yield from answer_stream.active_stream(
            self._state, self.chat_id, self.session.branch, **self._scope
        )
        return found
