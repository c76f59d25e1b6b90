"""The async store: the sync store's surface with ``async`` methods, over the same core.

Every method builds an operation in :mod:`ctxstore._core` and awaits :meth:`AsyncStore.run`;
only :meth:`AsyncStore._send` differs from the sync store, awaiting the round trip. A test checks
that both stores expose the same names and signatures.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from redis.exceptions import ResponseError

from ctxstore._base.plans import adrive, aperformer, arun_plan
from ctxstore._base.twins import documented_by
from ctxstore._core import telemetry
from ctxstore._core.driving import Driven
from ctxstore._core.failures import TRANSPORT_ERRORS, translate
from ctxstore._core.ops import append as append_ops
from ctxstore._core.ops import (
    branches,
    chats,
    checkpoints,
    data_keys,
    erasure,
    functions,
    health,
    opening,
    reads,
    redaction,
    retention,
    summaries,
    versions,
)
from ctxstore._core.ops import streams as answer_stream
from ctxstore._core.ops import sweep as sweeping
from ctxstore._core.ops.sweep import DEFAULT_GRACE_MS, check_sweep_options
from ctxstore._core.protocol import Operation, Outcome, WireCommand
from ctxstore._core.state import StoreState
from ctxstore.errors import ConfigurationError
from ctxstore.messages.tokens import loaded
from ctxstore.models import (
    AppendResult,
    BranchChain,
    ChainSize,
    ChatPage,
    CompactionTrigger,
    ConflictPolicy,
    ErasureProgress,
    ErasureReceipt,
    ExistingPolicy,
    FunctionsReport,
    Health,
    KeyRotation,
    MessageInput,
    MessageVersion,
    MigrationProgress,
    MigrationReport,
    OpenedChat,
    Redaction,
    StoredMessage,
    StreamPiece,
    SweepReport,
    VerifyReport,
    WrittenSummary,
)
from ctxstore.settings import STORE_DEFAULT, TTL, Settings, StoreDefault
from ctxstore.store.connection import fcall, socket_timeout_of
from ctxstore.store.factory import store_parts
from ctxstore.store.shell import StoreShell
from ctxstore.store.sync_store import AdminStore, Store

if TYPE_CHECKING:  # the models load pydantic, which the write path never needs
    from ctxstore.models import (
        BranchInfo,
        ChatGraph,
        ChatInfo,
        ChatMeta,
        CheckpointInfo,
    )
    from ctxstore.store.scoped import AsyncUserStore

T = TypeVar("T")


@documented_by(Store)
class AsyncStore(StoreShell):
    """The async chat-graph store, with :class:`Store`'s methods as coroutines. Create it with
    :func:`connect_async`."""

    def __init__(self, client: Any, state: StoreState, *, owns_client: bool) -> None:
        super().__init__(client, state, owns_client=owns_client)
        self._perform = aperformer(self.run)
        self._loop: asyncio.AbstractEventLoop | None = None

    def _serve(self, loop: asyncio.AbstractEventLoop) -> None:
        """Bind the store to ``loop`` on its first call; refuse another running loop at once.

        redis-py's asyncio connections belong to the loop that opened them: a call from a
        second loop (a thread pool's own, say) would wait on the first one's sockets until its
        timeout. Once the first loop is closed (``asyncio.run`` returned), the next loop takes
        the store over with a fresh connection pool; a Cluster client keeps its connections in
        each node, out of reach, so there a new loop needs a new store."""
        reset = getattr(getattr(self._client, "connection_pool", None), "reset", None)
        if self._loop is not None and (not self._loop.is_closed() or not callable(reset)):
            raise ConfigurationError(
                "this AsyncStore serves the event loop of its first call, and was called from "
                "another one: use one AsyncStore per event loop, or a sync Store (ctxstore."
                "connect), which serves any loop"
            )
        if self._loop is not None and callable(reset):
            reset()  # the old loop's connections cannot be used, nor closed, from this one
        self._loop = loop

    def admin(self) -> AsyncAdminStore:
        """The async form of :meth:`Store.admin`."""
        return AsyncAdminStore(self)

    def for_user(self, user_id: str) -> AsyncUserStore:
        """The async form of :meth:`Store.for_user`."""
        from ctxstore.store.scoped import AsyncUserStore

        return AsyncUserStore(self, user_id)

    async def close(self) -> None:
        """The async form of :meth:`Store.close`."""
        loop = asyncio.get_running_loop()
        if self._loop is not None and loop is not self._loop:
            self._serve(loop)  # the first loop's connections are dropped, not closed from here
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
        """The async form of :meth:`Store.run`."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self._serve(loop)
        if not self._state.message_tokens.loaded:  # an append counts before it sends
            await loaded(self._state.message_tokens)
        driven = Driven(self._state, operation)
        try:
            while not driven.done:
                try:
                    replies = await self._send(driven.request())
                except TRANSPORT_ERRORS as error:
                    raise driven.fail(error) from error
                driven.respond(replies)
            return driven.result()
        except BaseException as error:
            driven.failed(error)
            raise

    async def _send(self, commands: list[WireCommand]) -> list[Outcome]:
        if self._state.cluster:
            await self._client.initialize()  # the router reads the slot map (loaded lazily)
        if len(commands) == 1:
            # Routed on a Cluster: redis-py would ask a node for an FCALL's keys first.
            options = self._route(commands)[0] if self._state.cluster and fcall(commands[0]) else {}
            try:
                return [await self._client.execute_command(*commands[0], **options)]
            except ResponseError as error:
                return [error]
        pipe = self._client.pipeline(transaction=False)
        for command, options in zip(commands, self._route(commands), strict=True):
            pipe.execute_command(*command, **options)
        return list(await pipe.execute(raise_on_error=False))

    async def ping(self) -> Health:
        """The async form of :meth:`Store.ping`."""
        return await self.run(health.ping(self._state))

    # --- chats ---------------------------------------------------------------------------------

    async def upsert_chat(
        self,
        chat_id: str,
        user_id: str,
        metadata: Mapping[str, Any] | None = None,
        *,
        ttl: TTL | StoreDefault = STORE_DEFAULT,
    ) -> ChatMeta:
        """The async form of :meth:`Store.upsert_chat`."""
        return await self.run(opening.upsert_chat(self._state, chat_id, user_id, metadata, ttl=ttl))

    async def expire_chat(
        self, chat_id: str, ttl: TTL, *, user_id: str | None = None
    ) -> float | None:
        """The async form of :meth:`Store.expire_chat`."""
        return await self.run(
            retention.expire_chat(
                self._state, chat_id, ttl, user_id=self._owner(user_id, "expire_chat")
            )
        )

    async def open_chat(
        self,
        chat_id: str,
        user_id: str,
        metadata: Mapping[str, Any] | None = None,
        *,
        load: bool = False,
        max_depth: int | None = None,
    ) -> OpenedChat:
        """The async form of :meth:`Store.open_chat`."""
        return await self.run(
            opening.open_chat(
                self._state, chat_id, user_id, metadata, load=load, max_depth=max_depth
            )
        )

    async def get_chat(self, chat_id: str, *, user_id: str | None = None) -> ChatMeta:
        """The async form of :meth:`Store.get_chat`."""
        return await self.run(
            chats.get_chat(self._state, chat_id, user_id=self._owner(user_id, "get_chat"))
        )

    async def update_chat(
        self,
        chat_id: str,
        *,
        title: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        user_id: str | None = None,
    ) -> ChatMeta:
        """The async form of :meth:`Store.update_chat`."""
        return await self.run(
            chats.update_chat(
                self._state,
                chat_id,
                title=title,
                metadata=metadata,
                user_id=self._owner(user_id, "update_chat"),
            )
        )

    async def add_usage(
        self, chat_id: str, usage: Mapping[str, Any] | object, *, user_id: str | None = None
    ) -> dict[str, int]:
        """The async form of :meth:`Store.add_usage`."""
        return await self.run(
            chats.add_usage(self._state, chat_id, usage, user_id=self._owner(user_id, "add_usage"))
        )

    async def list_chats(
        self,
        *,
        user_id: str | None = None,
        metadata: tuple[str, Any] | Mapping[str, Any] | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[ChatInfo]:
        """The async form of :meth:`Store.list_chats`."""
        from ctxstore._core.ops import listing

        return await self.run(
            listing.list_chats(
                self._state,
                user_id=self._owner(user_id, "list_chats"),
                metadata=metadata,
                limit=limit,
                offset=offset,
            )
        )

    async def list_chats_page(
        self, *, user_id: str | None = None, cursor: str | None = None, limit: int = 50
    ) -> ChatPage:
        """The async form of :meth:`Store.list_chats_page`."""
        from ctxstore._core.ops import listing

        return await self.run(
            listing.list_chats_page(
                self._state,
                user_id=self._owner(user_id, "list_chats_page"),
                cursor=cursor,
                limit=limit,
            )
        )

    async def delete_chat(self, chat_id: str, *, user_id: str | None = None) -> bool:
        """The async form of :meth:`Store.delete_chat`."""
        return await self.run(
            chats.delete_chat(self._state, chat_id, user_id=self._owner(user_id, "delete_chat"))
        )

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
        request_id: str | None = None,
    ) -> AppendResult:
        """The async form of :meth:`Store.append`."""
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
                user_id=self._owner(user_id, "append"),
                request_id=request_id,
            )
        )

    async def get_message(
        self, chat_id: str, message_id: str, *, user_id: str | None = None
    ) -> StoredMessage:
        """The async form of :meth:`Store.get_message`."""
        return await self.run(
            reads.get_message(
                self._state, chat_id, message_id, user_id=self._owner(user_id, "get_message")
            )
        )

    async def message_versions(
        self, chat_id: str, message_id: str, *, user_id: str | None = None
    ) -> list[MessageVersion]:
        """The async form of :meth:`Store.message_versions`."""
        return await self.run(
            versions.message_versions(
                self._state, chat_id, message_id, user_id=self._owner(user_id, "message_versions")
            )
        )

    async def get_chain(
        self,
        chat_id: str,
        head: str | None,
        *,
        max_depth: int | None = None,
        newest: bool = False,
        user_id: str | None = None,
    ) -> list[StoredMessage]:
        """The async form of :meth:`Store.get_chain`."""
        return await self.run(
            reads.get_chain(
                self._state,
                chat_id,
                head,
                max_depth=max_depth,
                newest=newest,
                user_id=self._owner(user_id, "get_chain"),
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
        """The async form of :meth:`Store.load_branch`."""
        return await self.run(
            reads.load_branch(
                self._state,
                chat_id,
                branch,
                max_depth=max_depth,
                max_tokens=max_tokens,
                max_messages=max_messages,
                after_summary=after_summary,
                user_id=self._owner(user_id, "load_branch"),
            )
        )

    async def branch_size(
        self, chat_id: str, branch: str | None = None, *, user_id: str | None = None
    ) -> ChainSize:
        """The async form of :meth:`Store.branch_size`."""
        return await self.run(
            reads.branch_size(
                self._state, chat_id, branch, user_id=self._owner(user_id, "branch_size")
            )
        )

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
        """The async form of :meth:`Store.write_summary`."""
        return await self.run(
            summaries.write_summary(
                self._state,
                chat_id,
                message_id,
                content,
                metadata,
                tokens,
                job=job or "",
                user_id=self._owner(user_id, "write_summary"),
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
        """The async form of :meth:`Store.create_branch`."""
        return await self.run(
            branches.create_branch(
                self._state,
                chat_id,
                at_message,
                base=base,
                name=name,
                activate=activate,
                user_id=self._owner(user_id, "create_branch"),
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
        """The async form of :meth:`Store.branch_from_checkpoint`."""
        return await self.run(
            branches.branch_from_checkpoint(
                self._state,
                chat_id,
                checkpoint,
                base=base,
                name=name,
                activate=activate,
                user_id=self._owner(user_id, "branch_from_checkpoint"),
            )
        )

    async def get_branch(
        self, chat_id: str, name: str | None = None, *, user_id: str | None = None
    ) -> BranchInfo:
        """The async form of :meth:`Store.get_branch`."""
        return await self.run(
            branches.get_branch(
                self._state, chat_id, name, user_id=self._owner(user_id, "get_branch")
            )
        )

    async def list_branches(self, chat_id: str, *, user_id: str | None = None) -> list[BranchInfo]:
        """The async form of :meth:`Store.list_branches`."""
        return await self.run(
            branches.list_branches(
                self._state, chat_id, user_id=self._owner(user_id, "list_branches")
            )
        )

    async def set_active_branch(
        self, chat_id: str, name: str, *, user_id: str | None = None
    ) -> BranchInfo:
        """The async form of :meth:`Store.set_active_branch`."""
        return await self.run(
            branches.set_active_branch(
                self._state, chat_id, name, user_id=self._owner(user_id, "set_active_branch")
            )
        )

    # --- checkpoints ---------------------------------------------------------------------------

    async def upsert_checkpoint(
        self, chat_id: str, name: str, message_id: str, *, user_id: str | None = None
    ) -> CheckpointInfo:
        """The async form of :meth:`Store.upsert_checkpoint`."""
        return await self.run(
            checkpoints.upsert_checkpoint(
                self._state,
                chat_id,
                name,
                message_id,
                user_id=self._owner(user_id, "upsert_checkpoint"),
            )
        )

    async def get_checkpoint(
        self, chat_id: str, name: str, *, user_id: str | None = None
    ) -> CheckpointInfo:
        """The async form of :meth:`Store.get_checkpoint`."""
        return await self.run(
            checkpoints.get_checkpoint(
                self._state, chat_id, name, user_id=self._owner(user_id, "get_checkpoint")
            )
        )

    async def list_checkpoints(
        self, chat_id: str, *, user_id: str | None = None
    ) -> list[CheckpointInfo]:
        """The async form of :meth:`Store.list_checkpoints`."""
        return await self.run(
            checkpoints.list_checkpoints(
                self._state, chat_id, user_id=self._owner(user_id, "list_checkpoints")
            )
        )

    async def delete_checkpoint(
        self, chat_id: str, name: str, *, user_id: str | None = None
    ) -> bool:
        """The async form of :meth:`Store.delete_checkpoint`."""
        return await self.run(
            checkpoints.delete_checkpoint(
                self._state, chat_id, name, user_id=self._owner(user_id, "delete_checkpoint")
            )
        )

    # --- redaction -----------------------------------------------------------------------------

    async def redact_message(
        self,
        chat_id: str,
        message_id: str,
        *,
        reason: str | None = None,
        user_id: str | None = None,
    ) -> Redaction:
        """The async form of :meth:`Store.redact_message`."""
        return await self.run(
            redaction.redact_message(
                self._state,
                chat_id,
                message_id,
                reason=reason,
                user_id=self._owner(user_id, "redact_message"),
            )
        )

    # --- inspection ----------------------------------------------------------------------------

    async def get_graph(self, chat_id: str, *, user_id: str | None = None) -> ChatGraph:
        """The async form of :meth:`Store.get_graph`."""
        from ctxstore._core.ops import graph

        return await self.run(
            graph.get_graph(self._state, chat_id, user_id=self._owner(user_id, "get_graph"))
        )

    # --- maintenance ---------------------------------------------------------------------------

    async def verify_chat(self, chat_id: str, *, repair: bool = False) -> VerifyReport:
        """The async form of :meth:`Store.verify_chat`."""
        from ctxstore._core.ops.verify import chat as verify

        self._admin_only("verify_chat")
        return await self.run(verify.verify_chat(self._state, chat_id, repair=repair))

    async def erase_user(
        self, user_id: str, *, progress: Callable[[ErasureProgress], None] | None = None
    ) -> ErasureReceipt:
        """The async form of :meth:`Store.erase_user`."""
        self._admin_only("erase_user")
        return await self.run(erasure.erase_user(self._state, user_id, progress=progress))

    # --- export and import ---------------------------------------------------------------------

    def export_chat(
        self, chat_id: str, *, user_id: str | None = None, sealed: bool = False
    ) -> AsyncIterator[dict[str, Any]]:
        """The async form of :meth:`Store.export_chat`."""
        from ctxstore._core.ops.transfer import exports

        steps = exports.export_chat(
            self._state, chat_id, user_id=self._owner(user_id, "export_chat"), sealed=sealed
        )
        return adrive(telemetry.watched_plan(self._state, steps), self._perform)

    async def sweep(self, *, grace_ms: int = DEFAULT_GRACE_MS, pause: float = 0.0) -> SweepReport:
        """The async form of :meth:`Store.sweep`."""
        self._admin_only("sweep")
        check_sweep_options(grace_ms, pause)
        return await arun_plan(
            telemetry.watched_plan(
                self._state, sweeping.sweep(self._state, grace_ms=grace_ms, pause=pause)
            ),
            self._perform,
        )

    async def migrate(
        self,
        *,
        dry_run: bool = False,
        pause: float = 0.0,
        progress: Callable[[MigrationProgress], None] | None = None,
        encrypt: bool = False,
    ) -> MigrationReport:
        """The async form of :meth:`Store.migrate`."""
        from ctxstore._core.ops import migration

        self._admin_only("migrate")
        migration.check_migrate_options(pause)
        return await arun_plan(
            telemetry.watched_plan(
                self._state,
                migration.migrate(
                    self._state, dry_run=dry_run, pause=pause, progress=progress, encrypt=encrypt
                ),
            ),
            self._perform,
        )

    async def rotate_keys(self) -> KeyRotation:
        """The async form of :meth:`Store.rotate_keys`."""
        self._admin_only("rotate_keys")
        return await self.run(data_keys.rotate_keys(self._state))

    async def load_functions(self) -> FunctionsReport:
        """The async form of :meth:`Store.load_functions`."""
        self._admin_only("load_functions")
        commands = list(functions.node_commands())
        with telemetry.watched(self._state, "load_functions"):
            try:
                if not self._state.cluster:
                    replies = {"server": await self._pipelined(commands, {})}
                else:
                    await self._client.initialize()
                    replies = {
                        node.name: await self._pipelined(commands, {"target_nodes": node})
                        for node in self._client.get_primaries()
                    }
            except TRANSPORT_ERRORS as error:
                raise translate(error) from error
            return functions.functions_report(replies)

    async def _pipelined(
        self, commands: list[WireCommand], options: dict[str, Any]
    ) -> list[Outcome]:
        """``commands`` in one pipeline, each with ``options``; errors in place."""
        pipe = self._client.pipeline(transaction=False)
        for command in commands:
            pipe.execute_command(*command, **options)
        return list(await pipe.execute(raise_on_error=False))

    async def purge_namespace(self, *, confirm: str) -> int:
        """The async form of :meth:`Store.purge_namespace`."""
        self._admin_only("purge_namespace")
        return await self.run(sweeping.purge_namespace(self._state, confirm))

    def export_user(self, user_id: str) -> AsyncIterator[dict[str, Any]]:
        """The async form of :meth:`Store.export_user`."""
        from ctxstore._core.ops.transfer import exports

        self._admin_only("export_user")
        return adrive(
            telemetry.watched_plan(self._state, exports.export_user(self._state, user_id)),
            self._perform,
        )

    async def import_chat(
        self,
        records: Iterable[Mapping[str, Any]] | AsyncIterable[Mapping[str, Any]],
        *,
        chat_id: str | None = None,
        user_id: str | None = None,
    ) -> ChatMeta:
        """The async form of :meth:`Store.import_chat`."""
        from ctxstore._core.ops.transfer import imports

        return await arun_plan(
            telemetry.watched_plan(
                self._state,
                imports.import_chat(
                    self._state, chat_id=chat_id, user_id=self._owner(user_id, "import_chat")
                ),
            ),
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
        """The async form of :meth:`Store.read_stream`."""
        return adrive(
            telemetry.watched_plan(
                self._state,
                answer_stream.read_stream(
                    self._state,
                    chat_id,
                    stream_id,
                    after=after,
                    user_id=self._owner(user_id, "read_stream"),
                    wait_ms=answer_stream.wait_ms_for(socket_timeout_of(self._client)),
                ),
                "read_stream",  # the plan is read_stream's inner generator
            ),
            self._perform,
        )

    async def active_stream(
        self, chat_id: str, branch: str | None = None, *, user_id: str | None = None
    ) -> str | None:
        """The async form of :meth:`Store.active_stream`."""
        return await self.run(
            answer_stream.active_stream(
                self._state, chat_id, branch, user_id=self._owner(user_id, "active_stream")
            )
        )


@documented_by(AdminStore)
class AsyncAdminStore(AsyncStore):
    """An operator's handle on an :class:`AsyncStore` (``store.admin()``): see
    :class:`~ctxstore.store.AdminStore`."""

    any_owner = True

    def __init__(self, store: AsyncStore) -> None:
        super().__init__(store.client, store.state, owns_client=False)
        self._store = store

    def admin(self) -> AsyncAdminStore:
        """The async form of :meth:`AdminStore.admin`."""
        return self

    async def run(self, operation: Operation[T]) -> T:
        """The async form of :meth:`AdminStore.run`."""
        return await self._store.run(operation)

    async def close(self) -> None:
        """The async form of :meth:`AdminStore.close`."""
        await self._store.close()

    def __repr__(self) -> str:
        return f"<AsyncAdminStore of {self._store!r}>"


def connect_async(
    url: str | Any | None = None, *, settings: Settings | None = None, **overrides: Any
) -> AsyncStore:
    """The async form of :func:`~ctxstore.store.connect` (same arguments): an
    :class:`AsyncStore` for ``url`` or an existing async redis-py client. No I/O happens here,
    so it can be called at import time; the first operation connects."""
    client, state, owns = store_parts(
        url, asynchronous=True, settings=settings, overrides=overrides
    )
    return AsyncStore(client, state, owns_client=owns)


__all__ = ["AsyncAdminStore", "AsyncStore", "connect_async"]
