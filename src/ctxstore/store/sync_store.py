"""The sync store: one-line methods over the shared core, plus the sync transport.

Every method builds an operation in :mod:`ctxstore._core` and runs it with :meth:`Store.run`;
the only code here that is not a one-liner is :meth:`Store._send`, which ships one round trip.
:class:`ctxstore.store.async_store.AsyncStore` is the same surface with ``async`` methods.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from redis.exceptions import ResponseError

from ctxstore._base.plans import drive, performer, run_plan
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
from ctxstore.store.connection import DirectLine, fcall, socket_timeout_of
from ctxstore.store.factory import store_parts
from ctxstore.store.shell import StoreShell

if TYPE_CHECKING:  # the models load pydantic, which the write path never needs
    from ctxstore.models import (
        BranchInfo,
        ChatGraph,
        ChatInfo,
        ChatMeta,
        CheckpointInfo,
    )
    from ctxstore.store.scoped import UserStore

T = TypeVar("T")


class Store(StoreShell):
    """A chat-graph store on Redis (or the embedded store). Create it with :func:`connect`."""

    def __init__(self, client: Any, state: StoreState, *, owns_client: bool) -> None:
        super().__init__(client, state, owns_client=owns_client)
        self._perform = performer(self.run)
        self._line = DirectLine(client) if DirectLine.serves(client) else None

    def admin(self) -> AdminStore:
        """The operator's handle on this store (the worker, the CLI, the web console, verify,
        export and import): the same methods, on which a chat call that leaves out
        ``user_id`` acts on any owner's chat. It shares this store's connection."""
        return AdminStore(self)

    def for_user(self, user_id: str) -> UserStore:
        """The handle of one user (a request handler's): the chat methods without a
        ``user_id`` parameter, each acting as ``user_id`` (checked inside the same script as
        ever), listings listing that user's chats only. It shares this store's connection;
        make one per request, it costs nothing."""
        from ctxstore.store.scoped import UserStore

        return UserStore(self, user_id)

    def close(self) -> None:
        """Close the client if this store created it."""
        if self._line is not None:
            self._line.close()
        if self._owns_client:
            self._client.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def run(self, operation: Operation[T]) -> T:
        """Drive a core operation to its result, one round trip per step."""
        driven = Driven(self._state, operation)
        try:
            while not driven.done:
                try:
                    replies = self._send(driven.request())
                except TRANSPORT_ERRORS as error:
                    raise driven.fail(error) from error
                driven.respond(replies)
            return driven.result()
        except BaseException as error:
            driven.failed(error)
            raise

    def _send(self, commands: list[WireCommand]) -> list[Outcome]:
        if len(commands) == 1 and self._line is not None:
            return [self._line.execute(commands[0])]
        if len(commands) == 1:
            # Routed on a Cluster: redis-py would ask a node for an FCALL's keys first.
            options = self._route(commands)[0] if self._state.cluster and fcall(commands[0]) else {}
            try:
                return [self._client.execute_command(*commands[0], **options)]
            except ResponseError as error:
                return [error]
        pipe = self._client.pipeline(transaction=False)
        for command, options in zip(commands, self._route(commands), strict=True):
            pipe.execute_command(*command, **options)
        return list(pipe.execute(raise_on_error=False))

    def ping(self) -> Health:
        """Whether the server answers (a readiness probe), its round trip, the keyspace's format
        marker and the server's eviction policy, in one round trip (two on a Cluster). A
        keyspace marked with a format this release does not write is a ``FormatError``, as
        for every operation: a process of an older release is not ready."""
        return self.run(health.ping(self._state))

    # --- chats ---------------------------------------------------------------------------------

    def upsert_chat(
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
        return self.run(opening.upsert_chat(self._state, chat_id, user_id, metadata, ttl=ttl))

    def expire_chat(self, chat_id: str, ttl: TTL, *, user_id: str | None = None) -> float | None:
        """Make the chat expire ``ttl`` seconds from now and after every later write (a number
        or a timedelta; None: never); returns the retention now."""
        return self.run(
            retention.expire_chat(
                self._state, chat_id, ttl, user_id=self._owner(user_id, "expire_chat")
            )
        )

    def open_chat(
        self,
        chat_id: str,
        user_id: str,
        metadata: Mapping[str, Any] | None = None,
        *,
        load: bool = False,
        max_depth: int | None = None,
    ) -> OpenedChat:
        """Upsert as the owner and read the active branch (and its chain with ``load``) at once."""
        return self.run(
            opening.open_chat(
                self._state, chat_id, user_id, metadata, load=load, max_depth=max_depth
            )
        )

    def get_chat(self, chat_id: str, *, user_id: str | None = None) -> ChatMeta:
        """The chat's fields: owner, title, metadata (usage under ``"usage"``), times, active
        branch, retention."""
        return self.run(
            chats.get_chat(self._state, chat_id, user_id=self._owner(user_id, "get_chat"))
        )

    def update_chat(
        self,
        chat_id: str,
        *,
        title: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        user_id: str | None = None,
    ) -> ChatMeta:
        """Replace the title when given, shallow-merge metadata, bump ``updated_at``."""
        return self.run(
            chats.update_chat(
                self._state,
                chat_id,
                title=title,
                metadata=metadata,
                user_id=self._owner(user_id, "update_chat"),
            )
        )

    def add_usage(
        self, chat_id: str, usage: Mapping[str, Any] | object, *, user_id: str | None = None
    ) -> dict[str, int]:
        """Add token counts atomically; returns the chat's totals."""
        return self.run(
            chats.add_usage(self._state, chat_id, usage, user_id=self._owner(user_id, "add_usage"))
        )

    def list_chats(
        self,
        *,
        user_id: str | None = None,
        metadata: tuple[str, Any] | Mapping[str, Any] | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[ChatInfo]:
        """Chats newest ``updated_at`` first; ``metadata=(key, value)`` (or the seed's
        ``{"key": k, "value": v}``) matches type-exactly."""
        from ctxstore._core.ops import listing

        return self.run(
            listing.list_chats(
                self._state,
                user_id=self._owner(user_id, "list_chats"),
                metadata=metadata,
                limit=limit,
                offset=offset,
            )
        )

    def list_chats_page(
        self, *, user_id: str | None = None, cursor: str | None = None, limit: int = 50
    ) -> ChatPage:
        """One page of chats newest first and the cursor of the next (None after the last);
        a chat not updated while paging appears exactly once, one updated moves to the front."""
        from ctxstore._core.ops import listing

        return self.run(
            listing.list_chats_page(
                self._state,
                user_id=self._owner(user_id, "list_chats_page"),
                cursor=cursor,
                limit=limit,
            )
        )

    def delete_chat(self, chat_id: str, *, user_id: str | None = None) -> bool:
        """Delete the chat and its index entries; True if this call deleted it."""
        return self.run(
            chats.delete_chat(self._state, chat_id, user_id=self._owner(user_id, "delete_chat"))
        )

    # --- messages ------------------------------------------------------------------------------

    def append(
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
        one compaction job for the chat (see :mod:`ctxstore._core.ops.jobs`).

        ``request_id`` (1 to 64 letters, digits, ``-``, ``_``): the write's own id. A call
        repeated under it (after a timeout, a crash, a function's retry) is applied once and
        returns the first call's result, for as long as the chat remembers it (its last 32
        writes that carry a request id); the same id with other messages is a
        ``ConflictError`` naming it. Without one, a call makes its own, which covers redis-py
        resending it after a lost reply, not a retry of the call itself."""
        return self.run(
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

    def get_message(
        self, chat_id: str, message_id: str, *, user_id: str | None = None
    ) -> StoredMessage:
        """One message by id (``id``, ``parent_id``, ``created_at``, ``message``, ``metadata``)."""
        return self.run(
            reads.get_message(
                self._state, chat_id, message_id, user_id=self._owner(user_id, "get_message")
            )
        )

    def message_versions(
        self, chat_id: str, message_id: str, *, user_id: str | None = None
    ) -> list[MessageVersion]:
        """The versions of a message: the messages that share its parent (the original, its
        edits, regenerated answers), oldest first, each with the branches whose chain holds it.
        One round trip."""
        return self.run(
            versions.message_versions(
                self._state, chat_id, message_id, user_id=self._owner(user_id, "message_versions")
            )
        )

    def get_chain(
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
        return self.run(
            reads.get_chain(
                self._state,
                chat_id,
                head,
                max_depth=max_depth,
                newest=newest,
                user_id=self._owner(user_id, "get_chain"),
            )
        )

    def load_branch(
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
        return self.run(
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

    def branch_size(
        self, chat_id: str, branch: str | None = None, *, user_id: str | None = None
    ) -> ChainSize:
        """Messages and stored tokens of a branch's chain, without reading a payload."""
        return self.run(
            reads.branch_size(
                self._state, chat_id, branch, user_id=self._owner(user_id, "branch_size")
            )
        )

    def write_summary(
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
        return self.run(
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

    def create_branch(
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
        return self.run(
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

    def branch_from_checkpoint(
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
        return self.run(
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

    def get_branch(
        self, chat_id: str, name: str | None = None, *, user_id: str | None = None
    ) -> BranchInfo:
        """A branch by name (None: the active one): its head, length and whether it is active."""
        return self.run(
            branches.get_branch(
                self._state, chat_id, name, user_id=self._owner(user_id, "get_branch")
            )
        )

    def list_branches(self, chat_id: str, *, user_id: str | None = None) -> list[BranchInfo]:
        """Every branch of the chat, oldest first, with the active one marked."""
        return self.run(
            branches.list_branches(
                self._state, chat_id, user_id=self._owner(user_id, "list_branches")
            )
        )

    def set_active_branch(
        self, chat_id: str, name: str, *, user_id: str | None = None
    ) -> BranchInfo:
        """Make ``name`` the chat's one active branch (what engines and sessions follow)."""
        return self.run(
            branches.set_active_branch(
                self._state, chat_id, name, user_id=self._owner(user_id, "set_active_branch")
            )
        )

    # --- checkpoints ---------------------------------------------------------------------------

    def upsert_checkpoint(
        self, chat_id: str, name: str, message_id: str, *, user_id: str | None = None
    ) -> CheckpointInfo:
        """Name ``message_id``; an existing checkpoint of that name moves to it."""
        return self.run(
            checkpoints.upsert_checkpoint(
                self._state,
                chat_id,
                name,
                message_id,
                user_id=self._owner(user_id, "upsert_checkpoint"),
            )
        )

    def get_checkpoint(
        self, chat_id: str, name: str, *, user_id: str | None = None
    ) -> CheckpointInfo:
        """A checkpoint by name: the message it names and when it was placed."""
        return self.run(
            checkpoints.get_checkpoint(
                self._state, chat_id, name, user_id=self._owner(user_id, "get_checkpoint")
            )
        )

    def list_checkpoints(self, chat_id: str, *, user_id: str | None = None) -> list[CheckpointInfo]:
        """Every checkpoint, newest placement first."""
        return self.run(
            checkpoints.list_checkpoints(
                self._state, chat_id, user_id=self._owner(user_id, "list_checkpoints")
            )
        )

    def delete_checkpoint(self, chat_id: str, name: str, *, user_id: str | None = None) -> bool:
        """Remove a checkpoint (the message stays); True if it existed."""
        return self.run(
            checkpoints.delete_checkpoint(
                self._state, chat_id, name, user_id=self._owner(user_id, "delete_checkpoint")
            )
        )

    # --- redaction -----------------------------------------------------------------------------

    def redact_message(
        self,
        chat_id: str,
        message_id: str,
        *,
        reason: str | None = None,
        user_id: str | None = None,
    ) -> Redaction:
        """Redact one message: its payload and its metadata values become the store's
        ``redaction_marker``; its id, role, parent and position stay, so every branch,
        checkpoint and tool-call pair stays valid. Its token count is taken again (every chain
        through it follows), the summaries written from it are dropped (a compaction job is
        enqueued to write them again), its answer stream's pieces and a title made from it go
        too, and no process serves a copy it read before. One atomic script; redacting a
        redacted message changes nothing (``Redaction.redacted`` is False). The one change
        the immutable graph allows."""
        return self.run(
            redaction.redact_message(
                self._state,
                chat_id,
                message_id,
                reason=reason,
                user_id=self._owner(user_id, "redact_message"),
            )
        )

    # --- inspection ----------------------------------------------------------------------------

    def get_graph(self, chat_id: str, *, user_id: str | None = None) -> ChatGraph:
        """The whole chat at a glance: every message (id, parent, role, preview), branches,
        checkpoints."""
        from ctxstore._core.ops import graph

        return self.run(
            graph.get_graph(self._state, chat_id, user_id=self._owner(user_id, "get_graph"))
        )

    # --- maintenance ---------------------------------------------------------------------------

    def verify_chat(self, chat_id: str, *, repair: bool = False) -> VerifyReport:
        """Check the chat's invariants; with ``repair``, rebuild what its records determine.
        An operator's call, on any owner's chat: on ``store.admin()`` only."""
        from ctxstore._core.ops.verify import chat as verify

        self._admin_only("verify_chat")
        return self.run(verify.verify_chat(self._state, chat_id, repair=repair))

    def erase_user(
        self, user_id: str, *, progress: Callable[[ErasureProgress], None] | None = None
    ) -> ErasureReceipt:
        """Erase every chat ``user_id`` owns in the namespace and everything derived from them
        (index entries, compaction jobs, dead letters, workers' records, answer streams, turn
        leases), walking the user's owner record, which names every chat the user created.
        Resumable and idempotent: run again after a crash midway, it finishes the job. An
        operator's call: on ``store.admin()`` only. ``progress`` is told where it stands after
        each bounded step (see :mod:`ctxstore._core.ops.erasure`)."""
        self._admin_only("erase_user")
        return self.run(erasure.erase_user(self._state, user_id, progress=progress))

    # --- export and import ---------------------------------------------------------------------

    def export_chat(
        self, chat_id: str, *, user_id: str | None = None, sealed: bool = False
    ) -> Iterator[dict[str, Any]]:
        """The whole chat as records (see :mod:`ctxstore._core.format.portable`), read lazily
        in bounded chunks: the chat, its messages in write order, branches, checkpoints,
        summaries; their text in the clear for the caller, or with ``sealed`` (a store with
        encryption) sealed under the owner's data key: a backup that opens only in this
        namespace while the user's key exists, and never after ``erase_user``
        (docs/encryption.md)."""
        from ctxstore._core.ops.transfer import exports

        return drive(
            telemetry.watched_plan(
                self._state,
                exports.export_chat(
                    self._state,
                    chat_id,
                    user_id=self._owner(user_id, "export_chat"),
                    sealed=sealed,
                ),
            ),
            self._perform,
        )

    def sweep(self, *, grace_ms: int = DEFAULT_GRACE_MS, pause: float = 0.0) -> SweepReport:
        """Remove the listing-index and owner-record entries of chats that no longer exist
        (expired, deleted elsewhere), in bounded steps (at most 200 entries a call, checked with
        ``EXISTS``: no payload is read), ``pause`` seconds between steps. Owner-record entries
        younger than ``grace_ms`` are left (a chat being created). An operator's call: on
        ``store.admin()`` only; the worker runs it in the background."""
        self._admin_only("sweep")
        check_sweep_options(grace_ms, pause)
        return run_plan(
            telemetry.watched_plan(
                self._state, sweeping.sweep(self._state, grace_ms=grace_ms, pause=pause)
            ),
            self._perform,
        )

    def migrate(
        self,
        *,
        dry_run: bool = False,
        pause: float = 0.0,
        progress: Callable[[MigrationProgress], None] | None = None,
        encrypt: bool = False,
    ) -> MigrationReport:
        """Mark the keyspace with this release's storage format and bring every chat of the
        namespace to it, online, while writers run: bounded batches (one scan step's chats a
        round trip, ``pause`` seconds between them), resumable (a run after an interrupted
        one goes on from where it stopped) and idempotent. A chat that cannot be migrated is
        reported in the report's ``failed``, left as it was, and the walk goes on.
        ``dry_run`` counts the chats by format and changes nothing. ``progress`` is told where
        the walk stands after each batch. ``encrypt`` (a store with encryption): every chat
        written without encryption is sealed too, online and in place (its ids, positions and
        expiry kept); readers see it in the clear until its last step, sealed after it. An
        operator's call: on ``store.admin()`` only (it scans the namespace's keys). See
        docs/compatibility.md and docs/encryption.md."""
        from ctxstore._core.ops import migration

        self._admin_only("migrate")
        migration.check_migrate_options(pause)
        return run_plan(
            telemetry.watched_plan(
                self._state,
                migration.migrate(
                    self._state, dry_run=dry_run, pause=pause, progress=progress, encrypt=encrypt
                ),
            ),
            self._perform,
        )

    def rotate_keys(self) -> KeyRotation:
        """Wrap every user's data key of the namespace again under the key provider's current
        key-encryption key (after ``LocalKeyProvider.add_key()``, or a KMS key's rotation);
        no record changes. Needs ``encryption=``. An operator's call: on ``store.admin()``
        only (it scans the namespace's keys). See docs/encryption.md."""
        self._admin_only("rotate_keys")
        return self.run(data_keys.rotate_keys(self._state))

    def load_functions(self) -> FunctionsReport:
        """Load this release's Redis Functions library on every primary (a store loads it
        itself where a call finds it missing, when its user may: a tenant of
        ``deploy/acl.conf`` may not), and list the ctxstore libraries each then holds. An
        operator's call: on ``store.admin()`` only (``ctxstore functions load``; docs/speed.md)."""
        self._admin_only("load_functions")
        commands = list(functions.node_commands())
        with telemetry.watched(self._state, "load_functions"):
            try:
                if not self._state.cluster:
                    replies = {"server": self._pipelined(commands, {})}
                else:
                    replies = {
                        node.name: self._pipelined(commands, {"target_nodes": node})
                        for node in self._client.get_primaries()
                    }
            except TRANSPORT_ERRORS as error:
                raise translate(error) from error
            return functions.functions_report(replies)

    def _pipelined(self, commands: list[WireCommand], options: dict[str, Any]) -> list[Outcome]:
        """``commands`` in one pipeline, each with ``options``; errors in place."""
        pipe = self._client.pipeline(transaction=False)
        for command in commands:
            pipe.execute_command(*command, **options)
        return list(pipe.execute(raise_on_error=False))

    def purge_namespace(self, *, confirm: str) -> int:
        """Remove every key of the store's namespace (a tenant offboarded), in bounded batches,
        on every primary of a Cluster; returns how many keys were removed. ``confirm`` must
        repeat the namespace's name, and a store without a namespace refuses (nothing is
        removed either way). An operator's call: on ``store.admin()`` only."""
        self._admin_only("purge_namespace")
        return self.run(sweeping.purge_namespace(self._state, confirm))

    def export_user(self, user_id: str) -> Iterator[dict[str, Any]]:
        """Every chat ``user_id`` owns, as :meth:`export_chat` records, one chat after another
        (data portability), read lazily. An operator's call: on ``store.admin()`` only."""
        from ctxstore._core.ops.transfer import exports

        self._admin_only("export_user")
        return drive(
            telemetry.watched_plan(self._state, exports.export_user(self._state, user_id)),
            self._perform,
        )

    def import_chat(
        self,
        records: Iterable[Mapping[str, Any]],
        *,
        chat_id: str | None = None,
        user_id: str | None = None,
    ) -> ChatMeta:
        """Create a chat from the records of an export (under ``chat_id`` / owned by
        ``user_id`` when given): built aside in bounded chunks, published at once, or not at
        all; an existing chat id is a ConflictError (see
        :mod:`ctxstore._core.ops.transfer.imports`)."""
        from ctxstore._core.ops.transfer import imports

        return run_plan(
            telemetry.watched_plan(
                self._state,
                imports.import_chat(
                    self._state, chat_id=chat_id, user_id=self._owner(user_id, "import_chat")
                ),
            ),
            performer(self.run, imports.records_from(records)),
        )

    # --- answer streams ------------------------------------------------------------------------

    def read_stream(
        self,
        chat_id: str,
        stream_id: str,
        *,
        after: str | None = None,
        user_id: str | None = None,
    ) -> Iterator[StreamPiece]:
        """The pieces of a streamed answer (``engine.stream_turn``) after the piece id ``after``,
        in order, blocking while its writer is still producing, until the answer ends; a
        failed one raises StreamFailedError after the pieces written before it."""
        return drive(
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

    def active_stream(
        self, chat_id: str, branch: str | None = None, *, user_id: str | None = None
    ) -> str | None:
        """The stream id of the answer being streamed on ``branch`` (default: the active one)."""
        return self.run(
            answer_stream.active_stream(
                self._state, chat_id, branch, user_id=self._owner(user_id, "active_stream")
            )
        )


class AdminStore(Store):
    """An operator's handle on a :class:`Store` (``store.admin()``): the store's methods, on
    which a chat call that leaves out ``user_id`` acts on any owner's chat; one that names a
    ``user_id`` is checked against it as anywhere. The only handle that reaches any chat on
    purpose: the worker, the CLI, the web console, ``verify_chat``, exports and imports of
    whole namespaces use it. It shares the store's connection; closing it closes that store."""

    any_owner = True

    def __init__(self, store: Store) -> None:
        super().__init__(store.client, store.state, owns_client=False)
        self._store = store
        self._line = None  # every command goes through the store's own

    def admin(self) -> AdminStore:
        """This handle."""
        return self

    def run(self, operation: Operation[T]) -> T:
        """Drive a core operation through the store this handle was made from."""
        return self._store.run(operation)

    def close(self) -> None:
        """Close the store this handle was made from."""
        self._store.close()

    def __repr__(self) -> str:
        return f"<AdminStore of {self._store!r}>"


def connect(
    url: str | Any | None = None, *, settings: Settings | None = None, **overrides: Any
) -> Store:
    """A sync store for ``url`` (``memory://``, ``redis://``, ``rediss://``, ``unix://``,
    ``redis+cluster://``...; None reads ``CTXSTORE_URL``, and without it is a
    ``ConfigurationError``: ``memory://`` only when named) or an existing redis-py client.

    ``settings`` (a :class:`~ctxstore.settings.Settings`, built once) sets the namespace, the
    safety bounds, the token counter, the durability, the retention and the process cache;
    ``overrides`` replace fields of it by name (``namespace="acme"``, ``ttl=3600``...), and
    the redis-py client's own options go in ``redis_options={"socket_timeout": 2, ...}``. A
    keyword that is neither is a ``TypeError`` at the call, on every URL scheme (a client option
    as a plain keyword still works for this release, with a ``DeprecationWarning``); a bad
    setting is a ``ConfigurationError`` (or ``InvalidIdError``) before any client exists; what
    depends on the server is checked by the first operation.
    """
    client, state, owns = store_parts(
        url, asynchronous=False, settings=settings, overrides=overrides
    )
    return Store(client, state, owns_client=owns)


__all__ = ["AdminStore", "Store", "connect"]
