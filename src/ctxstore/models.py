"""Every value the API takes and returns, in one place and one type system: frozen dataclasses.

A chain holds thousands of messages and a save happens on every turn, so what crosses the API
must cost nothing to build and importing it must not load pydantic (serverless functions pay
for imports on every cold start). Messages therefore cross it as plain dicts
(:class:`StoredMessage`, a ``TypedDict``), and every other value is a frozen dataclass.

Chats, branches, checkpoints and graphs also serialize straight into HTTP responses and back:
they keep the pydantic-style methods of earlier releases (``model_dump()``,
``model_dump_json()``, ``model_validate()``, ``model_validate_json()``, ``model_copy()``), which
load pydantic on first use only and validate as strictly as before (unknown fields refused).
Frameworks that take dataclasses (FastAPI response models, ``pydantic.TypeAdapter``) take these
as they are.

All times are epoch milliseconds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from typing_extensions import NotRequired, Self, TypedDict

from ctxstore._base.owned import owned
from ctxstore.errors import ConfigurationError
from ctxstore.ui.parts import first_ui_message
from ctxstore.ui.to_model import model_messages_of
from ctxstore.ui.to_ui import to_ui_messages

if TYPE_CHECKING:
    from pydantic import TypeAdapter

_ADAPTERS: dict[type[Any], TypeAdapter[Any]] = {}


def _adapter(cls: type[Any]) -> TypeAdapter[Any]:
    """pydantic's adapter of a value type, made (and pydantic imported) on first use."""
    adapter = _ADAPTERS.get(cls)
    if adapter is None:
        from pydantic import TypeAdapter

        adapter = _ADAPTERS[cls] = TypeAdapter(cls)
    return adapter


class Serializable:
    """The pydantic-style methods of the values that travel as JSON (chats, branches,
    checkpoints, graphs): plain dataclasses underneath, validated by pydantic when read back."""

    __slots__ = ()
    #: What pydantic applies when it validates one (``model_validate``): no unknown field.
    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid"}

    def model_dump(
        self, *, mode: Literal["python", "json"] = "python", **options: Any
    ) -> dict[str, Any]:
        """The value as a dict (``mode="json"``: only JSON types), nested values included;
        ``options`` as pydantic's ``include``, ``exclude``, ``by_alias``..."""
        dumped: dict[str, Any] = _adapter(type(self)).dump_python(self, mode=mode, **options)
        return dumped

    def model_dump_json(self, **options: Any) -> str:
        """The value as a JSON text (``options`` as pydantic's ``indent``, ``exclude``...)."""
        return _adapter(type(self)).dump_json(self, **options).decode("utf-8")

    @classmethod
    def model_validate(cls, data: Any) -> Self:
        """A value of this type from a dict (such as ``model_dump()`` gave), validated:
        pydantic's ``ValidationError`` for a missing, unknown or mistyped field."""
        validated: Self = _adapter(cls).validate_python(data)
        return validated

    @classmethod
    def model_validate_json(cls, data: str | bytes) -> Self:
        """A value of this type from a JSON text, validated as :meth:`model_validate`."""
        validated: Self = _adapter(cls).validate_json(data)
        return validated

    def model_copy(self, *, update: Mapping[str, Any] | None = None) -> Self:
        """A copy with the fields in ``update`` replaced."""
        return dataclasses.replace(self, **dict(update or {}))  # type: ignore[type-var]


@dataclass(frozen=True, kw_only=True, slots=True)
class ChatMeta(Serializable):
    """A chat's own fields. ``metadata["usage"]`` holds the counters of ``add_usage``."""

    id: str
    user_id: str
    title: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    created_at: int
    updated_at: int
    active_branch: str = "main"
    #: Set when the chat is created: a chat deleted and re-created under the same id gets a new
    #: one, so caches and engines that knew the old chat never mistake the new one for it.
    incarnation: str = ""
    #: The retention in seconds: the chat expires whole that long after its last write (None:
    #: never). See ``connect(ttl=)``, ``upsert_chat(ttl=)``, ``store.expire_chat``.
    ttl: float | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class ChatInfo(ChatMeta):
    """A chat as listed: its fields plus how many messages and branches it holds."""

    message_count: int
    branch_count: int


@dataclass(frozen=True, kw_only=True, slots=True)
class BranchInfo(Serializable):
    """A branch: a named head. ``message_count`` is the length of its chain."""

    name: str
    head_message_id: str | None
    is_active: bool
    message_count: int
    created_at: int


@dataclass(frozen=True, kw_only=True, slots=True)
class CheckpointInfo(Serializable):
    """A named pointer to a message."""

    name: str
    message_id: str
    created_at: int


@dataclass(frozen=True, kw_only=True, slots=True)
class GraphNode(Serializable):
    """One message as drawn in a graph: its place and a one-line preview."""

    id: str
    parent_id: str | None
    role: str
    preview: str
    created_at: int


@dataclass(frozen=True, kw_only=True, slots=True)
class ChatGraph(Serializable):
    """The whole chat: every message, every branch (with the active flag), every checkpoint."""

    chat: ChatMeta
    messages: tuple[GraphNode, ...]
    branches: tuple[BranchInfo, ...]
    checkpoints: tuple[CheckpointInfo, ...]


@dataclass(frozen=True, kw_only=True, slots=True)
class MessageVersion(Serializable):
    """One version of a message: a message that shares its parent (an edit, a regenerated
    answer, the original), with the branches whose chain holds it (a chat UI's "< 2/3 >")."""

    id: str
    parent_id: str | None
    created_at: int
    message: dict[str, Any]
    #: The branches whose chain passes through this version, by name.
    branches: tuple[str, ...]
    metadata: dict[str, Any] | None = None


ConflictPolicy = Literal["raise", "rebase", "fork"]
#: The form of the messages an engine writes itself: AI SDK UI messages or chat-completions.
MessageFormat = Literal["model", "ui"]
ExistingPolicy = Literal["raise", "fork"]


@dataclass(frozen=True)
class AppendResult:
    """Where an append landed.

    ``branch`` is where the last message went: the requested branch, a conflict fork
    (``conflict_fork`` names it), or an edit fork (listed in ``created_branches``).
    """

    branch: str
    head_message_id: str
    message_ids: tuple[str, ...]
    updated_at: int
    rebased: bool = False
    conflict_fork: str | None = None
    created_branches: tuple[str, ...] = ()
    #: The branch's context (newest summary and the messages after it) in stored tokens, when
    #: the append checked a compaction threshold; -1 otherwise.
    context_tokens: int = -1
    #: The compaction job this append enqueued (its marker), None for none.
    compaction_job: str | None = None
    #: The incarnation of the chat written to (see :class:`ChatMeta`): pass it back as
    #: ``incarnation`` so a later write fails on a chat deleted (or re-created) since.
    incarnation: str | None = None
    #: True when the store had applied this write already (the same request id, sent again
    #: after its reply was lost): nothing was written now; the rest is the first reply's, and
    #: the result compares equal to it.
    resent: bool = field(default=False, compare=False)


class StoredMessage(TypedDict):
    """A message as read back: its id, its parent, when it was written, and the payload.

    ``message`` is the chat-message dict exactly as appended (``role``, ``content``,
    ``tool_calls``, ...), ready for ``litellm.completion(messages=...)``.
    """

    id: str
    parent_id: str | None
    created_at: int
    message: dict[str, Any]
    #: The caller's metadata of the message (never sent to a model); only when it has some.
    metadata: NotRequired[dict[str, Any]]


@dataclass(frozen=True)
class NewMessage:
    """A message to append under a chosen id (plain dicts get a generated id), with optional
    metadata stored beside it: returned by reads as ``metadata``, never part of ``message``."""

    message: Mapping[str, Any]
    id: str | None = None
    metadata: Mapping[str, Any] | None = None


#: What ``append`` takes per message: a chat-message dict (id generated) or a NewMessage.
MessageInput = Mapping[str, Any] | NewMessage


class StoredSummary(TypedDict):
    """A summary as read back: the last message it covers, its text, its metadata
    (``type``, ``covered``, ``tokens_before``, ``tokens_after``, ``model``, ...) and its tokens."""

    message_id: str
    created_at: int
    content: str
    metadata: dict[str, Any]
    tokens: int


@dataclass(frozen=True)
class BranchChain:
    """A branch and its chain (or the window of it asked for), root first, in one round trip.

    ``tokens`` counts what is returned (the messages, and the summary when there is one),
    ``chain_tokens`` and ``chain_length`` the whole chain (counts as stored at save; -1 where
    the read did not ask, as when a chat is opened). ``summary``: the newest summary on the
    chain, for a read ``after_summary``; ``context_tokens``: that summary plus every message
    after it (the chain's tokens when there is none).
    """

    branch: BranchInfo
    messages: list[StoredMessage]
    tokens: int = -1
    chain_tokens: int = -1
    chain_length: int = -1
    summary: StoredSummary | None = None
    context_tokens: int = -1


@dataclass(frozen=True)
class ChainSize:
    """The size of a branch's chain without its payloads: messages and stored tokens, the
    tokens of its newest summary plus the messages after it, and that summary's message."""

    messages: int
    tokens: int
    context_tokens: int
    summary_message_id: str | None


@dataclass(frozen=True)
class OpenedChat:
    """A chat opened by its owner: whether this call created it, its active branch and, when
    asked for, that branch's chain (root first)."""

    chat: ChatMeta
    created: bool
    branch: BranchInfo
    messages: list[StoredMessage]


@dataclass(frozen=True)
class ChatPage:
    """One page of a chat listing, newest first (``store.list_chats_page``).

    ``next_cursor`` continues after this page (None: this page ends the listing). ``skipped``
    names the chats left out of this page as corrupt (their hash is not what ctxstore writes,
    or the index holds something that is no chat id); each is logged on the ``ctxstore``
    logger too.
    """

    chats: tuple[ChatInfo, ...]
    next_cursor: str | None
    skipped: tuple[str, ...] = ()


@dataclass(frozen=True)
class Problem:
    """One broken invariant: what kind, which key and field, and what was found."""

    kind: str
    key: str
    field: str
    detail: str


@dataclass(frozen=True)
class VerifyReport:
    """What :func:`verify_chat` found (after repairing, when asked to repair)."""

    chat_id: str
    messages: int
    branches: int
    problems: tuple[Problem, ...]
    repaired: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """True when the chat holds no problem."""
        return not self.problems

    def as_dict(self) -> dict[str, Any]:
        """Plain data for JSON output."""
        return {
            "chat_id": self.chat_id,
            "ok": self.ok,
            "messages": self.messages,
            "branches": self.branches,
            "problems": [vars(problem) for problem in self.problems],
            "repaired": list(self.repaired),
        }


#: The kinds of data an erasure counts, in the order a receipt lists them.
ERASED_KINDS = (
    "chats",
    "chat keys",
    "messages",
    "answer stream entries",
    "index entries",
    "owner record entries",
    "data keys",
    "compaction jobs",
    "dead letters",
    "worker records",
)


@dataclass(frozen=True)
class ErasureReceipt:
    """What :meth:`~ctxstore.store.Store.erase_user` removed, and what it cannot reach.

    ``chat_ids``: every chat of the user this run erased or found gone (a chat the user's
    records named that another user owns now is left alone and not listed). ``removed``: how
    many of each kind (:data:`ERASED_KINDS`) this run removed; a second run after a complete one
    removes nothing, and after an interrupted one says what was left. ``started_at`` and
    ``finished_at``: epoch milliseconds. ``unreachable``: the places the user's data may still
    be and that no command of ctxstore removes (files, replicas, providers, logs)."""

    user_id: str
    chat_ids: tuple[str, ...]
    removed: dict[str, int]
    started_at: int
    finished_at: int
    unreachable: tuple[str, ...]

    @property
    def total(self) -> int:
        """Everything removed: keys and entries of every kind but the chats themselves."""
        return sum(count for kind, count in self.removed.items() if kind != "chats")

    def as_dict(self) -> dict[str, Any]:
        """Plain data for JSON output."""
        return {
            "user_id": self.user_id,
            "chat_ids": list(self.chat_ids),
            "removed": dict(self.removed),
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "unreachable": list(self.unreachable),
        }


@dataclass(frozen=True)
class ErasureProgress:
    """Where a running erasure stands (given to its ``progress`` callback): the ``stage``
    (``"chats"``, ``"indexes"``, ``"jobs"``, ``"dead letters"``, ``"workers"``, ``"record"``),
    and how many of the stage's items are done out of ``total`` (None when not known ahead)."""

    stage: str
    done: int
    total: int | None


@dataclass(frozen=True)
class Redaction:
    """What :meth:`~ctxstore.store.Store.redact_message` changed.

    ``redacted`` is False when the message was redacted already (nothing was written).
    ``tokens_before`` / ``tokens_after``: the message's own tokens; ``positions_recounted``:
    how many messages (on every branch through it) had their chain totals moved.
    ``summaries_dropped``: summaries written from its text, gone; ``compaction_job``: the job
    enqueued to summarize again (on ``branch``, the chat's active one), None when no summary
    was dropped. ``stream_entries_removed``: pieces of the answer stream that carried it."""

    message_id: str
    redacted: bool
    summaries_dropped: int
    stream_entries_removed: int
    tokens_before: int
    tokens_after: int
    positions_recounted: int
    title_replaced: bool
    compaction_job: str | None
    branch: str


@dataclass
class SweepReport:
    """What a sweep (:meth:`~ctxstore.store.Store.sweep`) did: the listing-index and
    owner-record entries it checked and removed (each named a chat that is gone), and the
    index and record keys it walked."""

    index_entries_checked: int = 0
    index_entries_removed: int = 0
    record_entries_checked: int = 0
    record_entries_removed: int = 0
    keys_walked: int = 0
    #: What the sweep could not walk and why ("" when it walked everything): a tenant's Redis
    #: user may not list key names, so its sweep leaves the user indexes and owner records.
    skipped: str = ""

    def as_dict(self) -> dict[str, int | str]:
        """Plain data for JSON output."""
        return dict(vars(self))


@dataclass(frozen=True)
class Health:
    """What :meth:`~ctxstore.store.Store.ping` found: the server answered in ``round_trip``
    seconds; its keyspace is marked ``format`` (by ``format_release``; None: unmarked, which
    is format 2); ``eviction_policy`` is its ``maxmemory-policy`` (None where the server does
    not tell it: managed services, ACL users without ``CONFIG``, the embedded store)."""

    round_trip: float
    format: str
    format_release: str | None
    eviction_policy: str | None

    @property
    def may_evict(self) -> bool:
        """Whether the server may drop keys under memory pressure (it must not: a dropped key
        cuts a chat's chains); False when it does not tell."""
        return self.eviction_policy not in (None, "noeviction")


@dataclass(frozen=True)
class MigrationProgress:
    """Where a running ``migrate`` stands (given to its ``progress`` callback after each
    batch): chats ``done`` (seen, migrated or not), ``total`` (the namespace index's count of
    chats, an estimate; None when unknown), ``failed`` so far and ``elapsed`` seconds."""

    done: int
    total: int | None
    failed: int
    elapsed: float

    @property
    def rate(self) -> float:
        """Chats a second so far."""
        return self.done / self.elapsed if self.elapsed > 0 else 0.0

    @property
    def remaining(self) -> float | None:
        """Seconds still to go at this rate (None when not known)."""
        if self.total is None or self.rate == 0:
            return None
        return max(0, self.total - self.done) / self.rate


@dataclass(frozen=True)
class MigrationFailure:
    """A chat ``migrate`` could not bring to the current format (left as it was) and why."""

    chat_id: str
    error: str


@dataclass(frozen=True)
class KeyRotation:
    """What :meth:`~ctxstore.store.Store.rotate_keys` did: ``key_id``, the key provider's
    current key-encryption key every data key is now wrapped under; ``users`` whose keys were
    read; ``data_keys`` wrapped again (no record changes: a data key is the same key after)."""

    key_id: str
    users: int = 0
    data_keys: int = 0


@dataclass(frozen=True)
class FunctionsReport:
    """What :meth:`~ctxstore.store.Store.load_functions` did: ``library``, this release's
    Redis Functions library; the primaries it was ``loaded`` on and those it was already
    ``present`` on ("host:port", or "server" for a single server); the ctxstore
    ``libraries`` each primary holds after (a previous release's beside this one's during a
    rolling deploy)."""

    library: str
    loaded: tuple[str, ...] = ()
    present: tuple[str, ...] = ()
    libraries: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready form (``ctxstore functions load --json``)."""
        return {
            "library": self.library,
            "loaded": list(self.loaded),
            "present": list(self.present),
            "libraries": {node: list(names) for node, names in self.libraries.items()},
        }


@dataclass
class MigrationReport:
    """What :meth:`~ctxstore.store.Store.migrate` found and did.

    ``format``: the format it brings chats to (this release's); ``previous_format``: the
    keyspace's marker before the run (``"2"`` for an unmarked keyspace) and ``marked``
    whether this run set the marker. ``by_format``: the chats seen, by the format they were in
    (``"none"`` for a chat hash without one). ``upgraded``: chats this run brought to
    ``format``; ``failed``: chats left as they were, each with its error. ``resumed``: the walk
    went on from where an interrupted run stopped. ``dry_run``: nothing was written.
    ``encrypt``: the run sealed the chats in the clear (``migrate(encrypt=True)``), ``sealed``
    of them."""

    format: str
    previous_format: str
    dry_run: bool = False
    encrypt: bool = False
    sealed: int = 0
    marked: bool = False
    resumed: bool = False
    chats: int = 0
    upgraded: int = 0
    by_format: dict[str, int] = field(default_factory=dict)
    failed: list[MigrationFailure] = field(default_factory=list)
    elapsed_ms: int = 0

    def as_dict(self) -> dict[str, Any]:
        """Plain data for JSON output."""
        data = dict(vars(self))
        data["failed"] = [dataclasses.asdict(failure) for failure in self.failed]
        return data


@dataclass(frozen=True, slots=True)
class StreamPiece:
    """A piece of an answer's text as a reader gets it: ``id`` is its Redis Stream entry id
    (pass it as ``after=`` to resume after it), ``text`` the text the writer added then."""

    id: str
    text: str


#: A pending job older than this may be enqueued again by a later save (milliseconds).
DEFAULT_JOB_TTL_MS = 15 * 60 * 1000


@dataclass(frozen=True)
class CompactionTrigger:
    """What a save checks: the context size (tokens) that makes a compaction job due. The job
    carries ``soft_tokens`` and ``min_recent_messages`` (what the compaction keeps verbatim), so
    a worker needs no per-chat settings of its own."""

    soft_tokens: int
    job_ttl_ms: int = DEFAULT_JOB_TTL_MS
    min_recent_messages: int = 4

    def __post_init__(self) -> None:
        for name in ("soft_tokens", "job_ttl_ms", "min_recent_messages"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigurationError(f"{name} must be a non-negative integer, got {value!r}")


class WrittenSummary(TypedDict):
    """What writing a summary did: whether this call wrote it (False: one existed and is
    returned), the summary, and the chain it covers (messages, tokens through its message)."""

    written: bool
    summary: StoredSummary
    covered_messages: int
    covered_tokens: int


@dataclass(frozen=True)
class ResolveResult:
    """What an LLM call takes: the rendered system prompt and the message list.

    ``messages`` holds the branch's persisted chain, root first, then the pending messages, as
    chat-message dicts: pass them straight to ``litellm.completion(messages=...)`` (with the
    system prompt as a leading ``{"role": "system", ...}`` message, see :meth:`with_system`).
    When a summary covers the start of the chain, ``messages`` starts after it and its text is
    in ``system_prompt`` (no marker message reaches a provider); ``summary`` is that summary.
    """

    system_prompt: str
    messages: list[dict[str, Any]]
    summary: StoredSummary | None = None
    #: The messages as stored and a function giving their ids: what ``ui_messages`` is built
    #: from, on first use (a resolve that only calls a model never pays for it).
    stored: tuple[list[dict[str, Any]], Callable[[], list[str]]] | None = field(
        default=None, repr=False, compare=False
    )
    #: The chain's messages that have versions: id -> (rank from 0, count), when the read
    #: asked for them (an engine whose ``message_format`` is ``"ui"``).
    versions: Mapping[str, tuple[int, int]] | None = field(default=None, repr=False, compare=False)

    @classmethod
    def of(
        cls,
        system_prompt: str,
        stored: list[dict[str, Any]],
        ids: Callable[[], list[str]],
        summary: StoredSummary | None = None,
        versions: Mapping[str, tuple[int, int]] | None = None,
        *,
        holds_ui: bool | None = None,
    ) -> ResolveResult:
        """The result for messages as stored (UI messages among them): ``messages`` holds
        what a model takes (UI messages converted, see :func:`ctxstore.ui.to_model_messages`),
        ``ui_messages`` what a frontend shows. ``holds_ui``: whether any is a UI message, when
        the caller knows (an engine does, from its chain); None looks."""
        messages = stored
        if holds_ui is None:
            holds_ui = first_ui_message(stored) >= 0
        if holds_ui:
            messages = [sent for message in stored for sent in model_messages_of(message)]
        return cls(system_prompt, messages, summary, (stored, ids), versions)

    @property
    def ui_messages(self) -> list[dict[str, Any]]:
        """The messages as AI SDK UI messages, for a ``useChat`` frontend: UI messages as they
        were saved, chat-completions messages converted (:func:`ctxstore.ui.to_ui_messages`),
        each with its stored id; a message with versions (when the read asked: an engine whose
        ``message_format`` is ``"ui"``) carries ``metadata["versions"] = {"index", "count"}``.
        Each access builds new messages: the caller's to change."""
        if self.stored is None:
            return owned(to_ui_messages(self.messages))
        payloads, ids = self.stored
        shown = owned(to_ui_messages(payloads, ids=ids()))
        if not self.versions:
            return shown
        for position, message in enumerate(shown):
            found = self.versions.get(message["id"])
            if found is not None:
                metadata = dict(message.get("metadata") or {})
                metadata["versions"] = {"index": found[0], "count": found[1]}
                shown[position] = {**message, "metadata": metadata}
        return shown

    def with_system(self) -> list[dict[str, Any]]:
        """The messages with the system prompt in front (omitted when it is empty)."""
        if not self.system_prompt:
            return list(self.messages)
        return [{"role": "system", "content": self.system_prompt}, *self.messages]


class SavedHead(str):
    """What ``save()`` returns: the new head's message id (a ``str``, as before), and where the
    save went.

    ``branch``: the branch the messages are on. ``forked_at``: None when they went where the
    engine was; otherwise the message a new side branch (not activated) starts at, because
    another turn's message had come after the engine's last saved one (or the engine's turn lost
    its lease): the engine moved to that branch. ``message_ids``: the stored ids, in order.
    ``resent``: the store had saved these messages already (a save retried after its reply was
    lost, under the same request id): nothing was written again.
    """

    branch: str
    forked_at: str | None
    message_ids: tuple[str, ...]
    resent: bool

    def __new__(
        cls,
        head: str,
        *,
        branch: str,
        forked_at: str | None = None,
        message_ids: tuple[str, ...] = (),
        resent: bool = False,
    ) -> SavedHead:
        saved = super().__new__(cls, head)
        saved.branch = branch
        saved.forked_at = forked_at
        saved.message_ids = message_ids
        saved.resent = resent
        return saved

    @property
    def forked(self) -> bool:
        """True when the save went onto a new side branch (see ``forked_at``)."""
        return self.forked_at is not None
