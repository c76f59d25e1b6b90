"""One user's handle on a store: ``store.for_user(user_id)``.

A request handler serves one user. Its handle, :class:`UserStore` (:class:`AsyncUserStore` on
an :class:`~ctxstore.store.AsyncStore`), has the store's chat methods without their
``user_id`` parameter: each acts as the handle's user, checked inside the same script as ever
(another user's chat answers exactly as a missing one), and its listings list that user's chats
only. Nothing on it reaches another owner's chat, and nothing on it can be told to: there is no
``user_id`` to pass, and neither :meth:`UserStore.admin` nor a ``for_user`` of someone else is
allowed (:class:`~ctxstore.errors.PermissionDeniedError`). Engines, ``chat()`` and the
adapters take a user handle wherever they take a store, and act as its user.

A handle is a pair (store, user id): it shares the store's connection and caches, costs
nothing to make, and is never closed itself (the store is). Each method is one line over the
store's, so the two can never differ but by the owner.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ctxstore._base.ids import check_key_id
from ctxstore._base.twins import documented_by
from ctxstore.errors import ConfigurationError, PermissionDeniedError, ScopeError
from ctxstore.models import (
    AppendResult,
    BranchChain,
    ChainSize,
    ChatPage,
    CompactionTrigger,
    ConflictPolicy,
    ExistingPolicy,
    MessageInput,
    MessageVersion,
    OpenedChat,
    Redaction,
    StoredMessage,
    StreamPiece,
    WrittenSummary,
)
from ctxstore.settings import STORE_DEFAULT, TTL, StoreDefault
from ctxstore.store.sync_store import Store

if TYPE_CHECKING:  # a sync process never loads the async shell
    from ctxstore.models import BranchInfo, ChatGraph, ChatInfo, ChatMeta, CheckpointInfo
    from ctxstore.store.async_store import AsyncStore

__all__ = ["AsyncUserStore", "UserStore"]


class _Scope:
    """What both handles share: the user, and the refusals of what a user's handle may not do."""

    def __init__(self, store: Any, user_id: str) -> None:
        self._store = store
        self._user_id = check_key_id(user_id, "user_id")

    @property
    def user_id(self) -> str:
        """The user every call of this handle acts as."""
        return self._user_id

    @property
    def store(self) -> Any:
        """Not available: a user's handle gives no way to a store that takes any user."""
        raise PermissionDeniedError(
            f"a {type(self).__name__} acts for {self._user_id!r} only and does not hand out its "
            "store: keep the store you made it from where operator code can reach it"
        )

    def admin(self) -> Any:
        """Refused (PermissionDeniedError): a user's handle never becomes an operator's."""
        raise PermissionDeniedError(
            f"a {type(self).__name__} acts for {self._user_id!r} only: take admin() from the "
            "store itself, in operator code"
        )

    def for_user(self, user_id: str) -> Any:
        """This handle for its own user; another user's is refused (PermissionDeniedError)."""
        if user_id != self._user_id:
            raise PermissionDeniedError(
                f"a {type(self).__name__} acts for {self._user_id!r} only: make another user's "
                "handle from the store itself"
            )
        return self

    def __repr__(self) -> str:
        return f"<{type(self).__name__} of {self._user_id!r}>"


def unscoped(store: Any) -> tuple[Any, str | None]:
    """(the store underneath, the handle's user, or None for a store)."""
    if isinstance(store, _Scope):
        return store._store, store.user_id
    return store, None


_MADE_BY = {"Store": "ctxstore.connect()", "AsyncStore": "ctxstore.connect_async()"}


def acting_as(
    caller: str,
    given: Any,
    user_id: str | None,
    wanted: type | tuple[type, ...],
    *,
    any_owner: bool = False,
) -> tuple[Any, str | None]:
    """(the store, the user) for code that takes a store or a user's handle and runs the
    core's operations itself (engines, ``chat()``'s resumes, the adapters): a handle gives
    both, and a ``user_id`` naming someone else is refused; a store takes ``user_id``, and
    without it is a ScopeError, unless ``any_owner`` and the store is an admin handle (then
    None: any owner). ``wanted``: the store class(es) the caller runs on."""
    store, scoped = unscoped(given)
    if not isinstance(store, wanted):
        names = " or ".join(
            f"{cls.__name__} ({_MADE_BY.get(cls.__name__, cls.__name__)})"
            for cls in (wanted if isinstance(wanted, tuple) else (wanted,))
        )
        raise ConfigurationError(
            f"{caller} takes a {names} or a for_user() handle of one, got {type(given).__name__}"
        )
    if scoped is not None:
        if user_id is not None and user_id != scoped:
            raise PermissionDeniedError(
                f"{caller}: the store given is {scoped!r}'s handle and user_id names "
                f"{user_id!r}; a user's handle acts as that user only"
            )
        return store, scoped
    if user_id is None and not (any_owner and getattr(store, "any_owner", False)):
        raise ScopeError(
            f"{caller} acts for one user: pass user_id=..., or a store.for_user(user_id) "
            "handle" + (", or store.admin() for any user" if any_owner else "")
        )
    return store, user_id


@documented_by(Store, form="user-scoped form")
class UserStore(_Scope):
    """One user's handle on a :class:`~ctxstore.store.Store` (``store.for_user(user_id)``):
    the store's chat methods without ``user_id``, each acting as that user (see the module)."""

    _store: Store

    def __init__(self, store: Store, user_id: str) -> None:
        super().__init__(store, user_id)

    def upsert_chat(
        self,
        chat_id: str,
        metadata: Mapping[str, Any] | None = None,
        *,
        ttl: TTL | StoreDefault = STORE_DEFAULT,
    ) -> ChatMeta:
        """The user-scoped form of :meth:`Store.upsert_chat`."""
        return self._store.upsert_chat(chat_id, self.user_id, metadata, ttl=ttl)

    def expire_chat(self, chat_id: str, ttl: TTL) -> float | None:
        """The user-scoped form of :meth:`Store.expire_chat`."""
        return self._store.expire_chat(chat_id, ttl, user_id=self.user_id)

    def open_chat(
        self,
        chat_id: str,
        metadata: Mapping[str, Any] | None = None,
        *,
        load: bool = False,
        max_depth: int | None = None,
    ) -> OpenedChat:
        """The user-scoped form of :meth:`Store.open_chat`."""
        return self._store.open_chat(
            chat_id, self.user_id, metadata, load=load, max_depth=max_depth
        )

    def get_chat(self, chat_id: str) -> ChatMeta:
        """The user-scoped form of :meth:`Store.get_chat`."""
        return self._store.get_chat(chat_id, user_id=self.user_id)

    def update_chat(
        self, chat_id: str, *, title: str | None = None, metadata: Mapping[str, Any] | None = None
    ) -> ChatMeta:
        """The user-scoped form of :meth:`Store.update_chat`."""
        return self._store.update_chat(
            chat_id, title=title, metadata=metadata, user_id=self.user_id
        )

    def add_usage(self, chat_id: str, usage: Mapping[str, Any] | object) -> dict[str, int]:
        """The user-scoped form of :meth:`Store.add_usage`."""
        return self._store.add_usage(chat_id, usage, user_id=self.user_id)

    def list_chats(
        self,
        *,
        metadata: tuple[str, Any] | Mapping[str, Any] | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[ChatInfo]:
        """The user-scoped form of :meth:`Store.list_chats`."""
        return self._store.list_chats(
            user_id=self.user_id, metadata=metadata, limit=limit, offset=offset
        )

    def list_chats_page(self, *, cursor: str | None = None, limit: int = 50) -> ChatPage:
        """The user-scoped form of :meth:`Store.list_chats_page`."""
        return self._store.list_chats_page(user_id=self.user_id, cursor=cursor, limit=limit)

    def delete_chat(self, chat_id: str) -> bool:
        """The user-scoped form of :meth:`Store.delete_chat`."""
        return self._store.delete_chat(chat_id, user_id=self.user_id)

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
        request_id: str | None = None,
    ) -> AppendResult:
        """The user-scoped form of :meth:`Store.append`."""
        return self._store.append(
            chat_id,
            branch,
            messages,
            expected_head=expected_head,
            on_conflict=on_conflict,
            on_existing=on_existing,
            compaction=compaction,
            user_id=self.user_id,
            request_id=request_id,
        )

    def get_message(self, chat_id: str, message_id: str) -> StoredMessage:
        """The user-scoped form of :meth:`Store.get_message`."""
        return self._store.get_message(chat_id, message_id, user_id=self.user_id)

    def message_versions(self, chat_id: str, message_id: str) -> list[MessageVersion]:
        """The user-scoped form of :meth:`Store.message_versions`."""
        return self._store.message_versions(chat_id, message_id, user_id=self.user_id)

    def get_chain(
        self, chat_id: str, head: str | None, *, max_depth: int | None = None, newest: bool = False
    ) -> list[StoredMessage]:
        """The user-scoped form of :meth:`Store.get_chain`."""
        return self._store.get_chain(
            chat_id, head, max_depth=max_depth, newest=newest, user_id=self.user_id
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
    ) -> BranchChain:
        """The user-scoped form of :meth:`Store.load_branch`."""
        return self._store.load_branch(
            chat_id,
            branch,
            max_depth=max_depth,
            max_tokens=max_tokens,
            max_messages=max_messages,
            after_summary=after_summary,
            user_id=self.user_id,
        )

    def branch_size(self, chat_id: str, branch: str | None = None) -> ChainSize:
        """The user-scoped form of :meth:`Store.branch_size`."""
        return self._store.branch_size(chat_id, branch, user_id=self.user_id)

    def write_summary(
        self,
        chat_id: str,
        message_id: str,
        content: str,
        *,
        metadata: Mapping[str, Any] | None = None,
        tokens: int | None = None,
        job: str | None = None,
    ) -> WrittenSummary:
        """The user-scoped form of :meth:`Store.write_summary`."""
        return self._store.write_summary(
            chat_id,
            message_id,
            content,
            metadata=metadata,
            tokens=tokens,
            job=job,
            user_id=self.user_id,
        )

    def create_branch(
        self,
        chat_id: str,
        at_message: str | None,
        *,
        base: str = "main",
        name: str | None = None,
        activate: bool = True,
    ) -> BranchInfo:
        """The user-scoped form of :meth:`Store.create_branch`."""
        return self._store.create_branch(
            chat_id, at_message, base=base, name=name, activate=activate, user_id=self.user_id
        )

    def branch_from_checkpoint(
        self,
        chat_id: str,
        checkpoint: str,
        *,
        base: str = "main",
        name: str | None = None,
        activate: bool = True,
    ) -> BranchInfo:
        """The user-scoped form of :meth:`Store.branch_from_checkpoint`."""
        return self._store.branch_from_checkpoint(
            chat_id, checkpoint, base=base, name=name, activate=activate, user_id=self.user_id
        )

    def get_branch(self, chat_id: str, name: str | None = None) -> BranchInfo:
        """The user-scoped form of :meth:`Store.get_branch`."""
        return self._store.get_branch(chat_id, name, user_id=self.user_id)

    def list_branches(self, chat_id: str) -> list[BranchInfo]:
        """The user-scoped form of :meth:`Store.list_branches`."""
        return self._store.list_branches(chat_id, user_id=self.user_id)

    def set_active_branch(self, chat_id: str, name: str) -> BranchInfo:
        """The user-scoped form of :meth:`Store.set_active_branch`."""
        return self._store.set_active_branch(chat_id, name, user_id=self.user_id)

    def upsert_checkpoint(self, chat_id: str, name: str, message_id: str) -> CheckpointInfo:
        """The user-scoped form of :meth:`Store.upsert_checkpoint`."""
        return self._store.upsert_checkpoint(chat_id, name, message_id, user_id=self.user_id)

    def get_checkpoint(self, chat_id: str, name: str) -> CheckpointInfo:
        """The user-scoped form of :meth:`Store.get_checkpoint`."""
        return self._store.get_checkpoint(chat_id, name, user_id=self.user_id)

    def list_checkpoints(self, chat_id: str) -> list[CheckpointInfo]:
        """The user-scoped form of :meth:`Store.list_checkpoints`."""
        return self._store.list_checkpoints(chat_id, user_id=self.user_id)

    def delete_checkpoint(self, chat_id: str, name: str) -> bool:
        """The user-scoped form of :meth:`Store.delete_checkpoint`."""
        return self._store.delete_checkpoint(chat_id, name, user_id=self.user_id)

    def redact_message(
        self, chat_id: str, message_id: str, *, reason: str | None = None
    ) -> Redaction:
        """The user-scoped form of :meth:`Store.redact_message`."""
        return self._store.redact_message(chat_id, message_id, reason=reason, user_id=self.user_id)

    def get_graph(self, chat_id: str) -> ChatGraph:
        """The user-scoped form of :meth:`Store.get_graph`."""
        return self._store.get_graph(chat_id, user_id=self.user_id)

    def export_chat(self, chat_id: str, *, sealed: bool = False) -> Iterator[dict[str, Any]]:
        """The user-scoped form of :meth:`Store.export_chat`."""
        return self._store.export_chat(chat_id, user_id=self.user_id, sealed=sealed)

    def import_chat(
        self, records: Iterable[Mapping[str, Any]], *, chat_id: str | None = None
    ) -> ChatMeta:
        """The user-scoped form of :meth:`Store.import_chat`."""
        return self._store.import_chat(records, chat_id=chat_id, user_id=self.user_id)

    def read_stream(
        self, chat_id: str, stream_id: str, *, after: str | None = None
    ) -> Iterator[StreamPiece]:
        """The user-scoped form of :meth:`Store.read_stream`."""
        return self._store.read_stream(chat_id, stream_id, after=after, user_id=self.user_id)

    def active_stream(self, chat_id: str, branch: str | None = None) -> str | None:
        """The user-scoped form of :meth:`Store.active_stream`."""
        return self._store.active_stream(chat_id, branch, user_id=self.user_id)


@documented_by(Store, form="async user-scoped form")
class AsyncUserStore(_Scope):
    """One user's handle on an :class:`~ctxstore.store.AsyncStore`: :class:`UserStore`'s
    methods as coroutines."""

    _store: AsyncStore

    def __init__(self, store: AsyncStore, user_id: str) -> None:
        super().__init__(store, user_id)

    async def upsert_chat(
        self,
        chat_id: str,
        metadata: Mapping[str, Any] | None = None,
        *,
        ttl: TTL | StoreDefault = STORE_DEFAULT,
    ) -> ChatMeta:
        """The async user-scoped form of :meth:`Store.upsert_chat`."""
        return await self._store.upsert_chat(chat_id, self.user_id, metadata, ttl=ttl)

    async def expire_chat(self, chat_id: str, ttl: TTL) -> float | None:
        """The async user-scoped form of :meth:`Store.expire_chat`."""
        return await self._store.expire_chat(chat_id, ttl, user_id=self.user_id)

    async def open_chat(
        self,
        chat_id: str,
        metadata: Mapping[str, Any] | None = None,
        *,
        load: bool = False,
        max_depth: int | None = None,
    ) -> OpenedChat:
        """The async user-scoped form of :meth:`Store.open_chat`."""
        return await self._store.open_chat(
            chat_id, self.user_id, metadata, load=load, max_depth=max_depth
        )

    async def get_chat(self, chat_id: str) -> ChatMeta:
        """The async user-scoped form of :meth:`Store.get_chat`."""
        return await self._store.get_chat(chat_id, user_id=self.user_id)

    async def update_chat(
        self, chat_id: str, *, title: str | None = None, metadata: Mapping[str, Any] | None = None
    ) -> ChatMeta:
        """The async user-scoped form of :meth:`Store.update_chat`."""
        return await self._store.update_chat(
            chat_id, title=title, metadata=metadata, user_id=self.user_id
        )

    async def add_usage(self, chat_id: str, usage: Mapping[str, Any] | object) -> dict[str, int]:
        """The async user-scoped form of :meth:`Store.add_usage`."""
        return await self._store.add_usage(chat_id, usage, user_id=self.user_id)

    async def list_chats(
        self,
        *,
        metadata: tuple[str, Any] | Mapping[str, Any] | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[ChatInfo]:
        """The async user-scoped form of :meth:`Store.list_chats`."""
        return await self._store.list_chats(
            user_id=self.user_id, metadata=metadata, limit=limit, offset=offset
        )

    async def list_chats_page(self, *, cursor: str | None = None, limit: int = 50) -> ChatPage:
        """The async user-scoped form of :meth:`Store.list_chats_page`."""
        return await self._store.list_chats_page(user_id=self.user_id, cursor=cursor, limit=limit)

    async def delete_chat(self, chat_id: str) -> bool:
        """The async user-scoped form of :meth:`Store.delete_chat`."""
        return await self._store.delete_chat(chat_id, user_id=self.user_id)

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
        request_id: str | None = None,
    ) -> AppendResult:
        """The async user-scoped form of :meth:`Store.append`."""
        return await self._store.append(
            chat_id,
            branch,
            messages,
            expected_head=expected_head,
            on_conflict=on_conflict,
            on_existing=on_existing,
            compaction=compaction,
            user_id=self.user_id,
            request_id=request_id,
        )

    async def get_message(self, chat_id: str, message_id: str) -> StoredMessage:
        """The async user-scoped form of :meth:`Store.get_message`."""
        return await self._store.get_message(chat_id, message_id, user_id=self.user_id)

    async def message_versions(self, chat_id: str, message_id: str) -> list[MessageVersion]:
        """The async user-scoped form of :meth:`Store.message_versions`."""
        return await self._store.message_versions(chat_id, message_id, user_id=self.user_id)

    async def get_chain(
        self, chat_id: str, head: str | None, *, max_depth: int | None = None, newest: bool = False
    ) -> list[StoredMessage]:
        """The async user-scoped form of :meth:`Store.get_chain`."""
        return await self._store.get_chain(
            chat_id, head, max_depth=max_depth, newest=newest, user_id=self.user_id
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
    ) -> BranchChain:
        """The async user-scoped form of :meth:`Store.load_branch`."""
        return await self._store.load_branch(
            chat_id,
            branch,
            max_depth=max_depth,
            max_tokens=max_tokens,
            max_messages=max_messages,
            after_summary=after_summary,
            user_id=self.user_id,
        )

    async def branch_size(self, chat_id: str, branch: str | None = None) -> ChainSize:
        """The async user-scoped form of :meth:`Store.branch_size`."""
        return await self._store.branch_size(chat_id, branch, user_id=self.user_id)

    async def write_summary(
        self,
        chat_id: str,
        message_id: str,
        content: str,
        *,
        metadata: Mapping[str, Any] | None = None,
        tokens: int | None = None,
        job: str | None = None,
    ) -> WrittenSummary:
        """The async user-scoped form of :meth:`Store.write_summary`."""
        return await self._store.write_summary(
            chat_id,
            message_id,
            content,
            metadata=metadata,
            tokens=tokens,
            job=job,
            user_id=self.user_id,
        )

    async def create_branch(
        self,
        chat_id: str,
        at_message: str | None,
        *,
        base: str = "main",
        name: str | None = None,
        activate: bool = True,
    ) -> BranchInfo:
        """The async user-scoped form of :meth:`Store.create_branch`."""
        return await self._store.create_branch(
            chat_id, at_message, base=base, name=name, activate=activate, user_id=self.user_id
        )

    async def branch_from_checkpoint(
        self,
        chat_id: str,
        checkpoint: str,
        *,
        base: str = "main",
        name: str | None = None,
        activate: bool = True,
    ) -> BranchInfo:
        """The async user-scoped form of :meth:`Store.branch_from_checkpoint`."""
        return await self._store.branch_from_checkpoint(
            chat_id, checkpoint, base=base, name=name, activate=activate, user_id=self.user_id
        )

    async def get_branch(self, chat_id: str, name: str | None = None) -> BranchInfo:
        """The async user-scoped form of :meth:`Store.get_branch`."""
        return await self._store.get_branch(chat_id, name, user_id=self.user_id)

    async def list_branches(self, chat_id: str) -> list[BranchInfo]:
        """The async user-scoped form of :meth:`Store.list_branches`."""
        return await self._store.list_branches(chat_id, user_id=self.user_id)

    async def set_active_branch(self, chat_id: str, name: str) -> BranchInfo:
        """The async user-scoped form of :meth:`Store.set_active_branch`."""
        return await self._store.set_active_branch(chat_id, name, user_id=self.user_id)

    async def upsert_checkpoint(self, chat_id: str, name: str, message_id: str) -> CheckpointInfo:
        """The async user-scoped form of :meth:`Store.upsert_checkpoint`."""
        return await self._store.upsert_checkpoint(chat_id, name, message_id, user_id=self.user_id)

    async def get_checkpoint(self, chat_id: str, name: str) -> CheckpointInfo:
        """The async user-scoped form of :meth:`Store.get_checkpoint`."""
        return await self._store.get_checkpoint(chat_id, name, user_id=self.user_id)

    async def list_checkpoints(self, chat_id: str) -> list[CheckpointInfo]:
        """The async user-scoped form of :meth:`Store.list_checkpoints`."""
        return await self._store.list_checkpoints(chat_id, user_id=self.user_id)

    async def delete_checkpoint(self, chat_id: str, name: str) -> bool:
        """The async user-scoped form of :meth:`Store.delete_checkpoint`."""
        return await self._store.delete_checkpoint(chat_id, name, user_id=self.user_id)

    async def redact_message(
        self, chat_id: str, message_id: str, *, reason: str | None = None
    ) -> Redaction:
        """The async user-scoped form of :meth:`Store.redact_message`."""
        return await self._store.redact_message(
            chat_id, message_id, reason=reason, user_id=self.user_id
        )

    async def get_graph(self, chat_id: str) -> ChatGraph:
        """The async user-scoped form of :meth:`Store.get_graph`."""
        return await self._store.get_graph(chat_id, user_id=self.user_id)

    def export_chat(self, chat_id: str, *, sealed: bool = False) -> AsyncIterator[dict[str, Any]]:
        """The async user-scoped form of :meth:`Store.export_chat`."""
        return self._store.export_chat(chat_id, user_id=self.user_id, sealed=sealed)

    async def import_chat(
        self,
        records: Iterable[Mapping[str, Any]] | AsyncIterable[Mapping[str, Any]],
        *,
        chat_id: str | None = None,
    ) -> ChatMeta:
        """The async user-scoped form of :meth:`Store.import_chat`."""
        return await self._store.import_chat(records, chat_id=chat_id, user_id=self.user_id)

    def read_stream(
        self, chat_id: str, stream_id: str, *, after: str | None = None
    ) -> AsyncIterator[StreamPiece]:
        """The async user-scoped form of :meth:`Store.read_stream`."""
        return self._store.read_stream(chat_id, stream_id, after=after, user_id=self.user_id)

    async def active_stream(self, chat_id: str, branch: str | None = None) -> str | None:
        """The async user-scoped form of :meth:`Store.active_stream`."""
        return await self._store.active_stream(chat_id, branch, user_id=self.user_id)
