"""The async store: the sync store's surface with ``async`` methods, over the same core.

Every method builds an operation in :mod:`ctxstore.core` and awaits :meth:`AsyncStore.run`;
only :meth:`AsyncStore._send` differs from the sync store, awaiting the round trip. A test checks
that both stores expose the same names and signatures.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from redis.exceptions import ResponseError

from ctxstore._base.plans import adrive, aperformer, arun_plan
from ctxstore._core.durability import DEFAULT_DURABILITY_TIMEOUT, DurabilityMode
from ctxstore._core.failures import TRANSPORT_ERRORS
from ctxstore._core.ops import append as append_ops
from ctxstore._core.ops import (
    branches,
    chats,
    checkpoints,
    graph,
    listing,
    opening,
    reads,
    retention,
    summaries,
)
from ctxstore._core.ops import streams as answer_stream
from ctxstore._core.ops.transfer import exports, imports
from ctxstore._core.ops.verify import chat as verify
from ctxstore._core.protocol import Exchange, Operation, Outcome, WireCommand
from ctxstore._core.server_checks import with_startup_checks
from ctxstore._core.state import StoreState
from ctxstore.messages.tokens import TokenCounter
from ctxstore.models import (
    AppendResult,
    BranchChain,
    ChainSize,
    ChatPage,
    CompactionTrigger,
    ConflictPolicy,
    ExistingPolicy,
    MessageInput,
    OpenedChat,
    StoredMessage,
    StreamPiece,
    VerifyReport,
    WrittenSummary,
)
from ctxstore.settings import STORE_DEFAULT, TTL, Limits, StoreDefault
from ctxstore.store.connection import pipeline_router, socket_timeout_of
from ctxstore.store.factory import store_parts

if TYPE_CHECKING:  # the models load pydantic, which the write path never needs
    from ctxstore.models import (
        BranchInfo,
        ChatGraph,
        ChatInfo,
        ChatMeta,
        CheckpointInfo,
    )

T = TypeVar("T")


class AsyncStore:
    """The async chat-graph store. Create it with :func:`connect_async`."""

    def __init__(self, client: Any, state: StoreState, *, owns_client: bool) -> None:
        self._client = client
        self._state = state
        self._owns_client = owns_client
        self._route = pipeline_router(client)
        self._perform = aperformer(self.run)

    @property
    def client(self) -> Any:
        """The redis-py (or fakeredis) client underneath."""
        return self._client

    @property
    def state(self) -> StoreState:
        """Key names, limits and clock (for code that composes its own operations)."""
        return self._state

    def clear_cache(self) -> None:
        """Forget the chains this process read through stores of this URL (the next read of each
        chat reads its whole chain). Messages are immutable, so this is never needed for
        correctness; it frees memory, and benchmarks use it to measure a cold read."""
        self._state.cache.clear()

    async def close(self) -> None:
        """Close the client if this store created it."""
        if self._owns_client:
            await self._client.aclose()

    async def __aenter__(self) -> AsyncStore:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def run(self, operation: Operation[T]) -> T:
        """Drive a core operation to its result, one round trip per step."""
        if self._state.checks_due:
            operation = with_startup_checks(self._state, operation)
        exchange = Exchange(operation, self._state.durability)
        while not exchange.done:
            try:
                replies = await self._send(exchange.request())
            except TRANSPORT_ERRORS as error:
                raise exchange.fail(error) from error
            exchange.respond(replies)
        return exchange.result

    async def _send(self, commands: list[WireCommand]) -> list[Outcome]:
        if len(commands) == 1:
            try:
                return [await self._client.execute_command(*commands[0])]
            except ResponseError as error:
                return [error]
        if self._state.cluster:
            await self._client.initialize()  # the router reads the slot map (loaded lazily)
        pipe = self._client.pipeline(transaction=False)
        for command, options in zip(commands, self._route(commands), strict=True):
            pipe.execute_command(*command, **options)
        return list(await pipe.execute(raise_on_error=False))

    # --- chats ---------------------------------------------------------------------------------

    async def upsert_chat(
        self,
        chat_id: str,
        user_id: str,
        metadata: Mapping[str, Any] | None = None,
        *,
        ttl: TTL | StoreDefault = STORE_DEFAULT,
    ) -> ChatMeta:
        """Create the chat (branch ``main``, active, empty) or check that ``user_id`` owns it.
        ``ttl``: seconds after its last write the chat expires whole (default: the store's
        ``connect(ttl=)``; None: never); given, it also changes an existing chat's."""
        return await self.run(opening.upsert_chat(self._state, chat_id, user_id, metadata, ttl=ttl))

    async def expire_chat(
        self, chat_id: str, ttl: TTL, *, user_id: str | None = None
    ) -> float | None:
        """Make the chat expire ``ttl`` seconds from now and after every later write (a number
        or a timedelta; None: never); returns the retention now."""
        return await self.run(retention.expire_chat(self._state, chat_id, ttl, user_id=user_id))

    async def open_chat(
        self,
        chat_id: str,
        user_id: str,
        metadata: Mapping[str, Any] | None = None,
        *,
        load: bool = False,
        max_depth: int | None = None,
    ) -> OpenedChat:
        """Upsert as the owner and read the active branch (and its chain with ``load``) at once."""
        return await self.run(
            opening.open_chat(
                self._state, chat_id, user_id, metadata, load=load, max_depth=max_depth
            )
        )

    async def get_chat(self, chat_id: str, *, user_id: str | None = None) -> ChatMeta:
        """The chat's fields: owner, title, metadata (usage under ``"usage"``), times, active
        branch, retention."""
        return await self.run(chats.get_chat(self._state, chat_id, user_id=user_id))

    async def update_chat(
        self,
        chat_id: str,
        *,
        title: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        user_id: str | None = None,
    ) -> ChatMeta:
        """Replace the title when given, shallow-merge metadata, bump ``updated_at``."""
        return await self.run(
            chats.update_chat(self._state, chat_id, title=title, metadata=metadata, user_id=user_id)
        )

    async def add_usage(
        self, chat_id: str, usage: Mapping[str, Any] | object, *, user_id: str | None = None
    ) -> dict[str, int]:
        """Add token counts atomically; returns the chat's totals."""
        return await self.run(chats.add_usage(self._state, chat_id, usage, user_id=user_id))

    async def list_chats(
        self,
        *,
        user_id: str | None = None,
        metadata: tuple[str, Any] | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[ChatInfo]:
        """Chats newest ``updated_at`` first; ``metadata=(key, value)`` matches type-exactly."""
        return await self.run(
            listing.list_chats(
                self._state, user_id=user_id, metadata=metadata, limit=limit, offset=offset
            )
        )

    async def list_chats_page(
        self, *, user_id: str | None = None, cursor: str | None = None, limit: int = 50
    ) -> ChatPage:
        """One page of chats newest first and the cursor of the next (None after the last);
        a chat not updated while paging appears exactly once, one updated moves to the front."""
        return await self.run(
            listing.list_chats_page(self._state, user_id=user_id, cursor=cursor, limit=limit)
        )

    async def delete_chat(self, chat_id: str, *, user_id: str | None = None) -> bool:
        """Delete the chat and its index entries; True if this call deleted it."""
        return await self.run(chats.delete_chat(self._state, chat_id, user_id=user_id))

    # --- messages ------------------------------------------------------------------------------

    async def append(
        self,
        chat_id: str,
        branch: str | None,
        messages: Iterable[MessageInput],
        *,
        expected_head: str | None,
        on_conflict: ConflictPolicy = "raise",
        on_existing: ExistingPolicy = "raise",
        compaction: CompactionTrigger | None = None,
        user_id: str | None = None,
    ) -> AppendResult:
        """Append ``messages`` to ``branch`` in order and move its head, atomically (one script);
        ``branch`` None: the branch active when the write runs.

        ``messages``: chat-message dicts (``role``, ``content``, ...), Responses-style items
        with a ``type``, or :class:`NewMessage` values (a chosen id, per-message metadata). A
        chat message's string ``"id"`` becomes its message id.

        ``expected_head``: the head this caller last saw (None for an empty branch). The head
        moves only if it is still that one (compare-and-set); otherwise ``on_conflict`` decides:
        ``"raise"`` (the default) raises ``HeadConflictError`` carrying ``current_head``;
        ``"rebase"`` appends onto the current head instead; ``"fork"`` writes onto a new
        auto-named branch that starts at ``expected_head`` (not activated). Nothing is lost.

        ``on_existing``: what a message whose id the chat already holds means. ``"raise"``
        (the default) raises ``MessageExistsError`` (messages are immutable); ``"fork"`` makes it
        an edit: a new branch at that message's parent (activated), where it is stored under a
        new id with the messages after it; the original stays.

        ``compaction``: an append that takes the branch's context to ``soft_tokens`` enqueues
        one compaction job for the chat (see :mod:`ctxstore.core.jobs`). A resent call (its
        reply lost) is recognized and applied once."""
        return await self.run(
            append_ops.append(
                self._state,
                chat_id,
                branch,
                messages,
                expected_head=expected_head,
                on_conflict=on_conflict,
                on_existing=on_existing,
                compaction=compaction,
                user_id=user_id,
            )
        )

    async def get_message(
        self, chat_id: str, message_id: str, *, user_id: str | None = None
    ) -> StoredMessage:
        """One message by id (``id``, ``parent_id``, ``created_at``, ``message``, ``metadata``)."""
        return await self.run(reads.get_message(self._state, chat_id, message_id, user_id=user_id))

    async def get_chain(
        self,
        chat_id: str,
        head: str | None,
        *,
        max_depth: int | None = None,
        newest: bool = False,
        user_id: str | None = None,
    ) -> list[StoredMessage]:
        """The chain ending at ``head``, root first; with ``newest=True`` a chain longer than
        ``max_depth`` comes back as its newest ``max_depth`` messages instead of raising."""
        return await self.run(
            reads.get_chain(
                self._state, chat_id, head, max_depth=max_depth, newest=newest, user_id=user_id
            )
        )

    async def load_branch(
        self,
        chat_id: str,
        branch: str | None = None,
        *,
        max_depth: int | None = None,
        max_tokens: int | None = None,
        max_messages: int | None = None,
        after_summary: bool = False,
        user_id: str | None = None,
    ) -> BranchChain:
        """A branch (the active one for None) with its chain, root first; with ``max_tokens`` /
        ``max_messages`` only the newest messages within that budget (a tool result never
        starts it; stored token counts, no payload read beyond what is returned); with
        ``after_summary`` the newest summary on the chain and the messages after it."""
        return await self.run(
            reads.load_branch(
                self._state,
                chat_id,
                branch,
                max_depth=max_depth,
                max_tokens=max_tokens,
                max_messages=max_messages,
                after_summary=after_summary,
                user_id=user_id,
            )
        )

    async def branch_size(
        self, chat_id: str, branch: str | None = None, *, user_id: str | None = None
    ) -> ChainSize:
        """Messages and stored tokens of a branch's chain, without reading a payload."""
        return await self.run(reads.branch_size(self._state, chat_id, branch, user_id=user_id))

    async def write_summary(
        self,
        chat_id: str,
        message_id: str,
        content: str,
        *,
        metadata: Mapping[str, Any] | None = None,
        tokens: int | None = None,
        job: str | None = None,
        user_id: str | None = None,
    ) -> WrittenSummary:
        """Attach a summary to ``message_id``, the last message it covers: it applies to every
        branch through that message. Written once; a second call returns the first summary.
        ``job``: the compaction marker (``AppendResult.compaction_job``) it settles."""
        return await self.run(
            summaries.write_summary(
                self._state,
                chat_id,
                message_id,
                content,
                metadata,
                tokens,
                job=job or "",
                user_id=user_id,
            )
        )

    # --- branches ------------------------------------------------------------------------------

    async def create_branch(
        self,
        chat_id: str,
        at_message: str | None,
        *,
        base: str = "main",
        name: str | None = None,
        activate: bool = True,
        user_id: str | None = None,
    ) -> BranchInfo:
        """A new branch at ``at_message``, auto-named ``<base>-v<k+1>`` unless ``name`` is given."""
        return await self.run(
            branches.create_branch(
                self._state,
                chat_id,
                at_message,
                base=base,
                name=name,
                activate=activate,
                user_id=user_id,
            )
        )

    async def branch_from_checkpoint(
        self,
        chat_id: str,
        checkpoint: str,
        *,
        base: str = "main",
        name: str | None = None,
        activate: bool = True,
        user_id: str | None = None,
    ) -> BranchInfo:
        """A new branch at a checkpoint's message (restoring it), named like ``create_branch``."""
        return await self.run(
            branches.branch_from_checkpoint(
                self._state,
                chat_id,
                checkpoint,
                base=base,
                name=name,
                activate=activate,
                user_id=user_id,
            )
        )

    async def get_branch(
        self, chat_id: str, name: str | None = None, *, user_id: str | None = None
    ) -> BranchInfo:
        """A branch by name (None: the active one): its head, length and whether it is active."""
        return await self.run(branches.get_branch(self._state, chat_id, name, user_id=user_id))

    async def list_branches(self, chat_id: str, *, user_id: str | None = None) -> list[BranchInfo]:
        """Every branch of the chat, oldest first, with the active one marked."""
        return await self.run(branches.list_branches(self._state, chat_id, user_id=user_id))

    async def set_active_branch(
        self, chat_id: str, name: str, *, user_id: str | None = None
    ) -> BranchInfo:
        """Make ``name`` the chat's one active branch (what engines and sessions follow)."""
        return await self.run(
            branches.set_active_branch(self._state, chat_id, name, user_id=user_id)
        )

    # --- checkpoints ---------------------------------------------------------------------------

    async def upsert_checkpoint(
        self, chat_id: str, name: str, message_id: str, *, user_id: str | None = None
    ) -> CheckpointInfo:
        """Name ``message_id``; an existing checkpoint of that name moves to it."""
        return await self.run(
            checkpoints.upsert_checkpoint(self._state, chat_id, name, message_id, user_id=user_id)
        )

    async def get_checkpoint(
        self, chat_id: str, name: str, *, user_id: str | None = None
    ) -> CheckpointInfo:
        """A checkpoint by name: the message it names and when it was placed."""
        return await self.run(
            checkpoints.get_checkpoint(self._state, chat_id, name, user_id=user_id)
        )

    async def list_checkpoints(
        self, chat_id: str, *, user_id: str | None = None
    ) -> list[CheckpointInfo]:
        """Every checkpoint, newest placement first."""
        return await self.run(checkpoints.list_checkpoints(self._state, chat_id, user_id=user_id))

    async def delete_checkpoint(
        self, chat_id: str, name: str, *, user_id: str | None = None
    ) -> bool:
        """Remove a checkpoint (the message stays); True if it existed."""
        return await self.run(
            checkpoints.delete_checkpoint(self._state, chat_id, name, user_id=user_id)
        )

    # --- inspection ----------------------------------------------------------------------------

    async def get_graph(self, chat_id: str, *, user_id: str | None = None) -> ChatGraph:
        """The whole chat at a glance: every message (id, parent, role, preview), branches,
        checkpoints."""
        return await self.run(graph.get_graph(self._state, chat_id, user_id=user_id))

    # --- maintenance ---------------------------------------------------------------------------

    async def verify_chat(self, chat_id: str, *, repair: bool = False) -> VerifyReport:
        """Check the chat's invariants; with ``repair``, rebuild what its records determine."""
        return await self.run(verify.verify_chat(self._state, chat_id, repair=repair))

    # --- export and import ---------------------------------------------------------------------

    async def export_chat(
        self, chat_id: str, *, user_id: str | None = None
    ) -> AsyncIterator[dict[str, Any]]:
        """The whole chat as records, read lazily in bounded chunks (see Store.export_chat)."""
        steps = exports.export_chat(self._state, chat_id, user_id=user_id)
        async for record in adrive(steps, self._perform):
            yield record

    async def import_chat(
        self,
        records: Iterable[Mapping[str, Any]] | AsyncIterable[Mapping[str, Any]],
        *,
        chat_id: str | None = None,
        user_id: str | None = None,
    ) -> ChatMeta:
        """Create a chat from the records of an export, an iterable or an async iterable (see
        Store.import_chat)."""
        return await arun_plan(
            imports.import_chat(self._state, chat_id=chat_id, user_id=user_id),
            aperformer(self.run, imports.arecords_from(records)),
        )

    # --- answer streams ------------------------------------------------------------------------

    def read_stream(
        self,
        chat_id: str,
        stream_id: str,
        *,
        after: str | None = None,
        user_id: str | None = None,
    ) -> AsyncIterator[StreamPiece]:
        """The pieces of a streamed answer (``engine.stream_turn``) after the piece id ``after``,
        in order, blocking while its writer is still producing, until the answer ends; a
        failed one raises StreamFailedError after the pieces written before it."""
        return adrive(
            answer_stream.read_stream(
                self._state,
                chat_id,
                stream_id,
                after=after,
                user_id=user_id,
                wait_ms=answer_stream.wait_ms_for(socket_timeout_of(self._client)),
            ),
            self._perform,
        )

    async def active_stream(
        self, chat_id: str, branch: str | None = None, *, user_id: str | None = None
    ) -> str | None:
        """The stream id of the answer being streamed on ``branch`` (default: the active one)."""
        return await self.run(
            answer_stream.active_stream(self._state, chat_id, branch, user_id=user_id)
        )


def connect_async(
    url: str | Any | None = None,
    *,
    namespace: str | None = None,
    prefix: str = "ctx",
    limits: Limits | None = None,
    clock: Callable[[], int] | None = None,
    cache_bytes: int | None = None,
    token_model: str | None = None,
    estimate_tokens: TokenCounter | None = None,
    durability: DurabilityMode | None = None,
    durability_timeout: float = DEFAULT_DURABILITY_TIMEOUT,
    ttl: TTL = None,
    **options: Any,
) -> AsyncStore:
    """An async store for ``url`` (see :mod:`ctxstore.connection`) or an existing async client.

    No I/O happens here, so it can be called at import time; the first operation connects.

    ``namespace`` fences a tenant (keys ``<prefix>:<namespace>:...``); ``limits`` sets the safety
    bounds (message size, chain depth, ...); ``clock`` returns epoch milliseconds (tests);
    ``cache_bytes`` bounds the process cache of chains read (default 32 MiB, 0 turns it off;
    stores of one URL share one cache, the first store's bound holds until another sets one);
    ``token_model`` / ``estimate_tokens`` count the tokens stored with each message appended
    (see :mod:`ctxstore.tokens`; default ``o200k_base``);
    ``durability`` (``"replica"`` / ``"aof"``) acknowledges a write only once a replica / the
    local fsync confirmed it within ``durability_timeout`` seconds, else DurabilityError (see
    :mod:`ctxstore.core.durability`; the server is checked at the first operation);
    ``ttl`` (seconds, or a timedelta) makes the chats this store creates expire whole that long
    after their last write (None, the default: never; see :mod:`ctxstore.core.retention`);
    other keyword arguments go to the redis-py client.
    """
    client, state, owns = store_parts(
        url,
        asynchronous=True,
        namespace=namespace,
        prefix=prefix,
        limits=limits,
        clock=clock,
        options=options,
        cache_bytes=cache_bytes,
        token_model=token_model,
        estimate_tokens=estimate_tokens,
        durability=durability,
        durability_timeout=durability_timeout,
        ttl=ttl,
    )
    return AsyncStore(client, state, owns_client=owns)


__all__ = ["AsyncStore", "connect_async"]
