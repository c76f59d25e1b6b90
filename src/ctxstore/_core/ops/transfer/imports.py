"""Importing a chat from its portable form (:mod:`ctxstore._core.format.portable`).

An import must never leave half a chat where a reader could see it, and must not hold Redis for
long however big the chat is. So it is built aside and published at once:

1. Records are checked as they arrive and turned into exactly what the store keeps (log records,
   alias entries, runs, token entries, branch, checkpoint and summary records). Every
   :data:`CHUNK_RECORDS` messages (or :data:`CHUNK_BYTES`), ``lua/import_stage.lua`` adds them
   to *staging keys*: beside the chat's keys (same hash tag), under names no read looks at,
   expiring :data:`STAGING_TTL_MS` after the last chunk.
2. Once the last record has arrived and the whole import checks out (its counts match the chat
   record, exactly one branch is active), ``lua/import_publish.lua`` renames the staging keys
   into place and writes the chat hash, in one script of constant work: before it no chat
   exists, after it the whole chat does. Then the chat enters the listing indexes (as when a
   chat is created). A chat id that exists is refused (``ConflictError``), and nothing is
   written.
3. A failure on the way (a malformed record, a refused publish, a lost connection, a caller
   that stops) removes the staging keys; if the process dies, they expire.

:func:`import_chat` is that whole import as a plan (:mod:`ctxstore._base.plans`): it asks the
shell for each record in turn (an :class:`~ctxstore._base.plans.Effect` of
:data:`NEXT_RECORD`, answered from the caller's iterable by :func:`records_from` /
:func:`arecords_from`), runs each staging chunk and the publish, and cleans up on failure.

Ids: the chat gets a new incarnation, as every chat created does (so engines, caches and
readers that knew a chat of the same id deleted since never take this one for it), and every
message keeps the id it was exported with, stored as a chosen id. A generated id of the source
chat names the same message here, and an export of the imported chat writes the same ids; new
messages appended after the import get generated ids of the new incarnation. The cost: one
alias entry and the id inside each record, as for any chosen id.

Positions, parents, runs and token totals are the source's (records come in write order), so
every chain, window and size reads back as it was.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from ctxstore._base.ids import check_key_id, check_name
from ctxstore._base.plans import Effect, Plan, Run
from ctxstore._core.format.chat import USAGE_PREFIX, chat_meta
from ctxstore._core.format.codec import encode
from ctxstore._core.format.fields import MAX_COUNT
from ctxstore._core.format.pointers import (
    MAX_RECORD_NUMBER,
    BranchRecord,
    branch_text,
    checkpoint_text,
)
from ctxstore._core.format.portable import FORMAT_VERSION, MISSING, take_value
from ctxstore._core.format.records import (
    PREVIOUS,
    check_metadata,
    check_payload,
    encode_record,
    is_generated_id,
    packed_time,
    run_member,
)
from ctxstore._core.format.sealed import METADATA, PAYLOAD, ChatSeal
from ctxstore._core.format.sealed_exports import (
    CHAT_KIND,
    MESSAGE_KIND,
    SEALED,
    binding,
    opened_record,
    summary_record_kind,
)
from ctxstore._core.format.summaries import MAX_SUMMARY_TOKENS, summary_member
from ctxstore._core.format.tokens import MAX_MESSAGE_TOKENS, check_chain_total, entry, flags_of
from ctxstore._core.format.versions import FORMAT, SEALED_FORMAT
from ctxstore._core.ids import new_incarnation, new_tags
from ctxstore._core.keys import ChatKeys
from ctxstore._core.ops import indexes, owner_records
from ctxstore._core.ops.chats import (
    chat_context,
    check_title,
    log_index_failures,
    metadata_args,
    sealed_metadata_args,
)
from ctxstore._core.ops.data_keys import owner_keys, provider_of
from ctxstore._core.protocol import (
    MAX_COMMAND_ARGUMENTS,
    Arg,
    Operation,
    command_call,
    script_call,
)
from ctxstore._core.scripts import load_script
from ctxstore._core.state import StoreState
from ctxstore.errors import (
    ConfigurationError,
    LimitExceededError,
    ValidationError,
)
from ctxstore.settings import MAX_TTL_SECONDS

if TYPE_CHECKING:
    from ctxstore.models import ChatMeta

log = logging.getLogger("ctxstore")

#: Messages per staging chunk, and the bytes after which a chunk goes early (records of up to
#: 1 MiB each): a chunk costs Redis about what an append of as many messages costs.
CHUNK_RECORDS = 1000
CHUNK_BYTES = 8 << 20
#: The arguments a staging call may carry besides its command, script, key count, 7 keys and
#: 4 fields: within the cap of a managed service (a message takes up to 5: its record, its
#: alias pair, a run pair; 1,000 messages that each start a run would take 5,000).
CHUNK_ARGUMENTS = MAX_COMMAND_ARGUMENTS - 14
#: The most arguments one record of an export adds to a chunk.
_RECORD_ARGUMENTS = 5
#: How long staging keys outlive the last chunk that touched them.
STAGING_TTL_MS = 15 * 60 * 1000
#: The staged keys, in the order both scripts take them.
STAGED = ("log", "alias", "runs", "tok", "branch", "checkpoint", "summary")
#: Times of message records and summaries: what msgpack holds as an int.
_MAX_MSGPACK_INT = (1 << 63) - 1

_FIELDS = {
    "chat": {
        "type",
        "sealed",
        "version",
        "id",
        "user_id",
        "title",
        "created_at",
        "updated_at",
        "ttl_ms",
        "usage",
        "metadata",
        "metadata_msgpack",
        "counts",
    },
    "message": {
        "type",
        "sealed",
        "id",
        "parent_id",
        "created_at",
        "tokens",
        "message",
        "message_msgpack",
        "metadata",
        "metadata_msgpack",
    },
    "branch": {"type", "name", "head", "created_at", "active"},
    "checkpoint": {"type", "name", "message_id", "created_at"},
    "summary": {
        "type",
        "sealed",
        "message_id",
        "created_at",
        "tokens",
        "content",
        "metadata",
        "metadata_msgpack",
    },
}
_COUNTED = ("messages", "branches", "checkpoints", "summaries")


@dataclass
class _Chunk:
    """What the next staging call adds."""

    records: list[bytes] = field(default_factory=list)
    tok: bytearray = field(default_factory=bytearray)
    aliases: list[Arg] = field(default_factory=list)
    runs: list[Arg] = field(default_factory=list)
    branches: list[Arg] = field(default_factory=list)
    checkpoints: list[Arg] = field(default_factory=list)
    summaries: list[Arg] = field(default_factory=list)
    size: int = 0

    @property
    def items(self) -> int:
        return (
            len(self.records)
            + (len(self.branches) + len(self.checkpoints) + len(self.summaries)) // 2
        )

    @property
    def arguments(self) -> int:
        """The staging call's arguments after its four fields."""
        return (
            len(self.records)
            + len(self.aliases)
            + len(self.runs)
            + len(self.branches)
            + len(self.checkpoints)
            + len(self.summaries)
        )

    def counts(self) -> str:
        return "\t".join(
            str(count)
            for count in (
                len(self.records),
                len(self.aliases) // 2,
                len(self.runs) // 2,
                len(self.branches) // 2,
                len(self.checkpoints) // 2,
                len(self.summaries) // 2,
            )
        )


@dataclass(frozen=True)
class _Header:
    """The chat record, checked."""

    chat_id: str
    user_id: str
    title: str | None
    created_at: int
    updated_at: int
    ttl_ms: int | None
    fields: list[Arg]
    counts: dict[str, int]


class ChatImport:
    """The state of one import: :meth:`feed` each record (it returns a staging operation to run
    when a chunk is full), then run :meth:`finish`; on any failure run :meth:`discard`.
    I/O-free; :func:`import_chat` is the plan that does all that."""

    def __init__(
        self, state: StoreState, *, chat_id: str | None = None, user_id: str | None = None
    ) -> None:
        self._state = state
        self._chat_id = None if chat_id is None else check_key_id(chat_id, "chat_id")
        self._user_id = None if user_id is None else check_key_id(user_id, "user_id")
        self._incarnation = new_incarnation()
        self._token = new_incarnation()
        self._number = 0
        self._header: _Header | None = None
        self._keys: ChatKeys | None = None
        self._positions: dict[str, int] = {}
        self._depths: list[int] = []
        self._totals: list[int] = []
        self._tags: list[str] = []
        self._chunk = _Chunk()
        self._staged = 0
        self._aliases = 0
        self._runs = 0
        self._branches: set[str] = set()
        self._active: list[str] = []
        self._checkpoints: set[str] = set()
        self._summaries: set[int] = set()
        #: A store with encryption seals the records for the new incarnation (after the chat
        #: record, which names the owner whose keys seal them).
        self._seal: ChatSeal | None = None
        #: What opens the records of a sealed export (its chat record names the binding).
        self._opener: ChatSeal | None = None

    # --- records -------------------------------------------------------------------------------

    def feed(self, record: object) -> Operation[None] | None:
        """Check one record and take it in; returns the staging operation of a full chunk."""
        self._number += 1
        where = f"record {self._number}"
        if not isinstance(record, Mapping):
            raise ValidationError(f"{where} is not a mapping but a {type(record).__name__}")
        kind = record.get("type")
        if not isinstance(kind, str) or kind not in _FIELDS:
            raise ValidationError(
                f"{where} has type {kind!r}; a record's type is one of {sorted(_FIELDS)}"
            )
        where = f"{where} ({kind})"
        unknown = set(record) - _FIELDS[kind]
        if unknown:
            raise ValidationError(
                f"{where} has fields this format does not: {sorted(map(str, unknown))}"
            )
        if (kind == "chat") != (self._number == 1):
            raise ValidationError(
                f"{where}: an export starts with its one chat record"
                if self._number == 1
                else f"{where}: only the first record is a chat"
            )
        self._check_sealing(kind, record, where)
        if kind == "chat":
            if SEALED in record:
                return self._open_sealed(record, where)
            self._header = self._start(record, where)
            if self._state.settings.encryption is not None:
                return self._take_keys(self._header.user_id)
        elif kind == "message":
            self._message(self._opened_message(record, where), where)
        elif kind == "branch":
            self._branch(record, where)
        elif kind == "checkpoint":
            self._checkpoint(record, where)
        else:
            self._summary(self._opened_summary(record, where), where)
        chunk = self._chunk
        if (
            chunk.items >= CHUNK_RECORDS
            or chunk.size >= CHUNK_BYTES
            or chunk.arguments > CHUNK_ARGUMENTS - _RECORD_ARGUMENTS
        ):
            return self._stage()
        return None

    def _check_sealing(self, kind: str, record: Mapping[str, Any], where: str) -> None:
        """A sealed export's messages and summaries are all sealed, a plain one's none."""
        if kind in ("message", "summary") and (SEALED in record) != (self._opener is not None):
            raise ValidationError(
                f"{where} is sealed, in an export that is not"
                if SEALED in record
                else f"{where} is in the clear, in a sealed export"
            )

    def _open_sealed(self, record: Mapping[str, Any], where: str) -> Operation[None]:
        """A sealed export's chat record opened with its owner's keys (never made: a sealed
        export whose owner has none was erased), then taken in as a plain one's."""
        provider_of(self._state)
        source_chat = check_key_id(record.get("id"), f"{where} id")
        owner = check_key_id(record.get("user_id"), f"{where} user_id")
        if self._user_id is not None and self._user_id != owner:
            raise ValidationError(
                f"{where}: a sealed export imports for its owner only (import its plain export "
                "to give a chat to another user); nothing was imported"
            )
        namespace, incarnation = binding(record, where)
        keys = yield from owner_keys(self._state, owner)
        self._opener = ChatSeal(keys, namespace, source_chat, incarnation)
        opened = self._open(record, record[SEALED]["values"], (CHAT_KIND, 0, 0), where)
        self._header = self._start(opened, where)
        yield from self._take_keys(self._header.user_id)

    def _opened_message(self, record: Mapping[str, Any], where: str) -> Mapping[str, Any]:
        if self._opener is None:
            return record
        parent = self._reference(record.get("parent_id"), f"{where} parent_id", nullable=True)
        position = len(self._depths)
        return self._open(record, record[SEALED], (MESSAGE_KIND, position, parent), where)

    def _opened_summary(self, record: Mapping[str, Any], where: str) -> Mapping[str, Any]:
        if self._opener is None:
            return record
        message_id = record.get("message_id")
        position = self._reference(message_id, f"{where} message_id", nullable=False)
        kind = summary_record_kind(str(message_id))
        return self._open(record, record[SEALED], (kind, position, 0), where)

    def _open(
        self, record: Mapping[str, Any], sealed: object, place: tuple[bytes, int, int], where: str
    ) -> dict[str, Any]:
        """A sealed record's fields, opened for ``place`` (kind, position, parent)."""
        assert self._opener is not None, "a sealed export's chat record comes first"
        return opened_record(self._opener, record, sealed, *place, where)

    def _take_keys(self, user_id: str) -> Operation[None]:
        """The owner's data keys (made if the owner has none), to seal the records with."""
        keys = yield from owner_keys(self._state, user_id, create=True)
        chat_id = self._require_keys().chat_id
        self._seal = ChatSeal(keys, self._state.keyspace.namespace, chat_id, self._incarnation)

    def _start(self, record: Mapping[str, Any], where: str) -> _Header:
        version = record.get("version")
        if type(version) is not int or version != FORMAT_VERSION:
            raise ValidationError(
                f"{where} has format version {version!r}; this ctxstore reads version "
                f"{FORMAT_VERSION}"
            )
        chat_id = self._chat_id or check_key_id(record.get("id"), f"{where} id")
        user_id = self._user_id or check_key_id(record.get("user_id"), f"{where} user_id")
        title = record.get("title")
        if title is not None:
            check_title(title)
        ttl = record.get("ttl_ms")
        if ttl is not None and not _whole(ttl, 1, MAX_TTL_SECONDS * 1000):
            raise ValidationError(f"{where} ttl_ms must be null or a positive whole number")
        metadata = take_value(record, "metadata", where, required=True)
        if not isinstance(metadata, Mapping):
            raise ValidationError(f"{where} metadata must be a mapping")
        fields = metadata_args(metadata, self._state)
        usage = record.get("usage")
        if not isinstance(usage, Mapping):
            raise ValidationError(f"{where} usage must be a mapping of counters")
        for name, value in usage.items():
            check_name(name, f"{where} usage counter")
            if not _whole(value, 0, MAX_COUNT):
                raise ValidationError(f"{where} usage {name!r} must be a count up to 2^53")
            fields += [USAGE_PREFIX + name, str(value)]
        counts = record.get("counts")
        if not isinstance(counts, Mapping) or set(counts) != set(_COUNTED):
            raise ValidationError(f"{where} counts must name {', '.join(_COUNTED)}")
        for name in _COUNTED:
            if not _whole(counts[name], 0, MAX_COUNT):
                raise ValidationError(f"{where} counts {name!r} must be a count")
        self._keys = self._state.keyspace.chat(chat_id)
        return _Header(
            chat_id=chat_id,
            user_id=user_id,
            title=title,
            created_at=_time(record, "created_at", where, MAX_COUNT),
            updated_at=_time(record, "updated_at", where, MAX_COUNT),
            ttl_ms=ttl,
            fields=fields,
            counts={name: counts[name] for name in _COUNTED},
        )

    def _message(self, record: Mapping[str, Any], where: str) -> None:
        message_id = check_name(record.get("id"), f"{where} id")
        if message_id in self._positions:
            raise ValidationError(f"{where} repeats message id {message_id!r}")
        if is_generated_id(message_id, self._incarnation):
            raise ValidationError(f"{where} id {message_id!r} has the form of a generated id")
        parent = self._reference(record.get("parent_id"), f"{where} parent_id", nullable=True)
        created_at = _time(record, "created_at", where, _MAX_MSGPACK_INT)
        tokens = _count(
            record.get("tokens"),
            MAX_MESSAGE_TOKENS,
            f"{where} tokens must be a count up to {MAX_MESSAGE_TOKENS}",
        )
        limit = self._state.limits.max_message_bytes
        # Opaque items too: a chat an adapter wrote may hold them, and an export must import.
        payload = check_payload(
            take_value(record, "message", where, required=True), where, any_item=True
        )
        body = encode(payload, what=where, limit=limit)
        metadata = take_value(record, "metadata", where, required=False)
        extra = b""
        if metadata is not MISSING:
            extra = encode(check_metadata(metadata, where), what=f"{where} metadata", limit=limit)
        position = len(self._depths)
        depth = (self._depths[parent] if parent >= 0 else 0) + 1
        if depth > self._state.limits.max_chain_depth:
            limit_depth = self._state.limits.max_chain_depth
            raise LimitExceededError(
                f"{where} makes a chain of {depth} messages, over the limit of {limit_depth}",
                what="chain depth",
                limit=limit_depth,
                length=depth,
            )
        total = check_chain_total((self._totals[parent] if parent >= 0 else 0) + tokens, where)
        if not self._tags:
            self._tags = new_tags(256)
        tag = self._tags.pop()
        follows = parent >= 0 and parent == position - 1
        chunk = self._chunk
        if self._seal is not None:
            body = self._seal.seal(PAYLOAD, body, position, parent)
            if extra:
                extra = self._seal.seal(METADATA, extra, position, parent)
        record_bytes = encode_record(
            body,
            created_at=packed_time(created_at),
            tag=tag,
            chosen=message_id,
            metadata=extra,
            parent=PREVIOUS if follows else parent,
        )
        chunk.records.append(record_bytes)
        chunk.size += len(record_bytes)
        chunk.tok += entry(flags_of(payload), total)
        chunk.aliases += [message_id, position]
        self._aliases += 1
        if not follows:
            chunk.runs += [position, run_member(position, parent, depth)]
            self._runs += 1
        self._positions[message_id] = position
        self._depths.append(depth)
        self._totals.append(total)

    def _branch(self, record: Mapping[str, Any], where: str) -> None:
        name = check_name(record.get("name"), f"{where} name")
        if name in self._branches:
            raise ValidationError(f"{where} repeats branch {name!r}")
        head = record.get("head")
        position = self._reference(head, f"{where} head", nullable=True)
        created_at = _time(record, "created_at", where, MAX_RECORD_NUMBER)
        active = record.get("active")
        if type(active) is not bool:
            raise ValidationError(f"{where} active must be true or false")
        self._branches.add(name)
        if active:
            self._active.append(name)
        depth = self._depths[position] if position >= 0 else 0
        seq = len(self._branches)
        raw = branch_text(BranchRecord(position, head, created_at, seq, depth))
        self._chunk.branches += [name, raw]
        self._chunk.size += len(raw)

    def _checkpoint(self, record: Mapping[str, Any], where: str) -> None:
        name = check_name(record.get("name"), f"{where} name")
        if name in self._checkpoints:
            raise ValidationError(f"{where} repeats checkpoint {name!r}")
        message_id = record.get("message_id")
        position = self._reference(message_id, f"{where} message_id", nullable=False)
        created_at = _time(record, "created_at", where, MAX_RECORD_NUMBER)
        self._checkpoints.add(name)
        raw = checkpoint_text(position, str(message_id), created_at, len(self._checkpoints))
        self._chunk.checkpoints += [name, raw]
        self._chunk.size += len(raw)

    def _summary(self, record: Mapping[str, Any], where: str) -> None:
        message_id = record.get("message_id")
        position = self._reference(message_id, f"{where} message_id", nullable=False)
        if position in self._summaries:
            raise ValidationError(f"{where}: message {message_id!r} has a summary already")
        created_at = _time(record, "created_at", where, _MAX_MSGPACK_INT)
        problem = f"{where} tokens must be a count up to 2^40 - 1"
        tokens = _count(record.get("tokens"), MAX_SUMMARY_TOKENS, problem)
        content = record.get("content")
        if not isinstance(content, str) or not content.strip():
            raise ValidationError(f"{where} content must be a non-empty text")
        metadata = take_value(record, "metadata", where, required=True)
        if type(metadata) is not dict:
            raise ValidationError(f"{where} metadata must be a mapping")
        member = summary_member(
            message_id=str(message_id),
            created_at=created_at,
            content=content,
            metadata=metadata,
            tokens=tokens,
            limit=self._state.limits.max_message_bytes,
            what=where,
            seal=self._seal,
        )
        self._summaries.add(position)
        self._chunk.summaries += [position, member]
        self._chunk.size += len(member)

    def _reference(self, value: object, where: str, *, nullable: bool) -> int:
        """The position of the earlier message ``value`` names (-1 for null, when allowed)."""
        if value is None and nullable:
            return -1
        position = self._positions.get(value) if isinstance(value, str) else None
        if position is None:
            raise ValidationError(f"{where} {value!r} names no message before this record")
        return position

    # --- operations ----------------------------------------------------------------------------

    def _stage(self) -> Operation[None]:
        """The staging call of the chunk taken in so far (and a fresh chunk for what follows)."""
        keys, chunk, first = self._staging_keys(), self._chunk, self._staged
        self._chunk = _Chunk()
        self._staged += len(chunk.records)
        script = load_script("import_stage")
        yield script_call(
            script,
            keys,
            (
                first,
                STAGING_TTL_MS,
                bytes(chunk.tok),
                chunk.counts(),
                *chunk.records,
                *chunk.aliases,
                *chunk.runs,
                *chunk.branches,
                *chunk.checkpoints,
                *chunk.summaries,
            ),
            parse=int,
            context=chat_context(self._require_keys().chat_id),
            writes=True,
        )

    def finish(self) -> Operation[ChatMeta]:
        """Stage what is left, check the import is whole, publish it, then index it."""
        header = self._header
        if header is None:
            raise ValidationError("nothing to import: an export starts with its chat record")
        found = {
            "messages": len(self._depths),
            "branches": len(self._branches),
            "checkpoints": len(self._checkpoints),
            "summaries": len(self._summaries),
        }
        for name in _COUNTED:
            if found[name] != header.counts[name]:
                raise ValidationError(
                    f"the export holds {found[name]} {name} where its chat record says "
                    f"{header.counts[name]}: it is incomplete or was changed"
                )
        if len(self._active) != 1:
            raise ValidationError(
                f"an export has exactly one active branch, this one {len(self._active)}"
            )
        if self._chunk.items or self._chunk.runs:
            yield from self._stage()
        keys = self._require_keys()
        script = load_script("import_publish")
        counts = (
            len(self._depths),
            self._aliases,
            self._runs,
            len(self._branches),
            len(self._checkpoints),
            len(self._summaries),
        )
        title, fields = header.title, header.fields
        if self._seal is not None:  # the title and metadata values sealed as the records
            title = None if title is None else self._seal.seal_title(title)
            fields = sealed_metadata_args(self._seal, fields)
        publish = script_call(
            script,
            (*keys.select(script.key_names[:9]), *self._staging_keys()),
            (
                header.user_id,
                self._incarnation,
                header.created_at,
                header.updated_at,
                self._active[0],
                "0" if title is None else "1",
                title or "",
                "" if header.ttl_ms is None else header.ttl_ms,
                "\t".join(str(count) for count in counts),
                FORMAT if self._seal is None else SEALED_FORMAT,
                *fields,
            ),
            parse=lambda reply: chat_meta(keys.chat_id, keys.key("chat"), reply, self._seal),
            context=chat_context(keys.chat_id),
            writes=True,
        )
        # The chat's owner record names it before its first key exists (erasure walks it).
        meta: ChatMeta = yield from owner_records.created_after_record(
            self._state, header.user_id, keys.chat_id, self._incarnation, publish
        )
        self._state.owners.remember(keys.chat_id, meta.user_id)
        self._state.cache.forget(keys.chat_id)
        outcomes = yield indexes.touch_calls(
            self._state, keys.chat_id, meta.user_id, meta.updated_at, "GT"
        )
        log_index_failures(outcomes)
        return meta

    def discard(self) -> Operation[None] | None:
        """Removing the staging keys (None when nothing can have been staged)."""
        if self._keys is None:
            return None
        staged = self._staging_keys()
        return self._unlink(staged)

    @staticmethod
    def _unlink(staged: tuple[str, ...]) -> Operation[None]:
        yield command_call(("UNLINK", *staged), keys=staged, writes=True)

    def _require_keys(self) -> ChatKeys:
        if self._keys is None:
            raise ValidationError("nothing to import: an export starts with its chat record")
        return self._keys

    def _staging_keys(self) -> tuple[str, ...]:
        keys = self._require_keys()
        return tuple(keys.staging(self._token, name) for name in STAGED)


def _whole(value: object, low: int, high: int) -> bool:
    return type(value) is int and low <= value <= high


def _count(value: object, high: int, problem: str) -> int:
    """``value`` when it is an int from 0 to ``high`` (not a bool), else the ValidationError."""
    if type(value) is not int or not 0 <= value <= high:
        raise ValidationError(problem)
    return value


def _time(record: Mapping[str, Any], name: str, where: str, high: int) -> int:
    return _count(
        record.get(name), high, f"{where} {name} must be a whole number of epoch milliseconds"
    )


class _ImportSignal:
    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return self._name


#: The effect an import asks for: the caller's next record.
NEXT_RECORD: Final = _ImportSignal("the next record to import")
#: What answers :data:`NEXT_RECORD` after the last record.
NO_MORE_RECORDS: Final = _ImportSignal("no more records")


def import_chat(
    state: StoreState, *, chat_id: str | None = None, user_id: str | None = None
) -> Plan[ChatMeta]:
    """An import as a plan: every record checked as it comes, full chunks staged, the chat
    published at once; on any failure the staging keys are removed before the error goes on
    (a failed removal is logged: they expire on their own)."""
    importer = ChatImport(state, chat_id=chat_id, user_id=user_id)
    try:
        while (record := (yield Effect(NEXT_RECORD))) is not NO_MORE_RECORDS:
            chunk = importer.feed(record)
            if chunk is not None:
                yield Run(chunk)
        meta: ChatMeta = yield Run(importer.finish())
        return meta
    except BaseException:
        cleanup = importer.discard()
        if cleanup is not None:
            try:
                yield Run(cleanup)
            except Exception as error:  # the staging keys expire on their own
                log.warning("an import's staging keys were not removed: %s", error)
        raise


def records_from(records: Iterable[Any]) -> Callable[[Any], Any]:
    """The sync shell's answer to :data:`NEXT_RECORD`: the next of ``records``."""
    source = iter(records)

    def next_record(request: Any) -> Any:
        if request is not NEXT_RECORD:
            raise ConfigurationError(f"an import does not ask for {request!r}")
        return next(source, NO_MORE_RECORDS)

    return next_record


def arecords_from(records: Iterable[Any] | AsyncIterable[Any]) -> Callable[[Any], Any]:
    """The async shell's answer to :data:`NEXT_RECORD`, from an iterable or an async one."""
    if not isinstance(records, AsyncIterable):
        return records_from(records)
    source = aiter(records)

    async def next_record(request: Any) -> Any:
        if request is not NEXT_RECORD:
            raise ConfigurationError(f"an import does not ask for {request!r}")
        return await anext(source, NO_MORE_RECORDS)

    return next_record
