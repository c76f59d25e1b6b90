"""Checking a chat's invariants, and rebuilding what is derived from its records.

The records in ``log`` are the truth. Everything else a read relies on is derived from them:
``alias`` (chosen id -> position), ``runs`` (the linear stretches of the log, with depths), the
head id and chain length inside each branch record, the message id inside each checkpoint
record, the counters of the chat hash, the chat's entries in the two chat indexes and in its
owner's record (:mod:`ctxstore._core.ops.owner_records`: a chat written by a release that kept
no record is found there, and a repair records it). A bug, a
half-applied manual edit or a restore from a partial backup can leave those out of step with the
records, and reads then fail (or worse, answer wrongly). :func:`verify_chat` reads every key of
a chat with plain commands, recomputes what the records imply and reports each difference as a
:class:`Problem`. With ``repair=True`` it rewrites the derived keys from the records in one
script (:file:`lua/repair_chat.lua`, atomic on a Cluster too, since a chat's keys share a slot),
then the index entries (other slots), then verifies again. It never writes a record: problems in
the records themselves are reported, not repaired, and keep the derived keys as they are.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import msgpack

from ctxstore._core.format.chat import (
    METADATA_PREFIX,
    check_chat_field,
    check_format,
    check_incarnation,
    check_owner,
)
from ctxstore._core.format.fields import field_count, scored_pairs, text
from ctxstore._core.format.pointers import (
    BranchRecord,
    branch_text,
    checkpoint_text,
    loose_fields,
)
from ctxstore._core.format.records import (
    derived_id,
    gc_paused,
    is_generated_id,
    read_record,
    record_fields,
    run_member,
)
from ctxstore._core.format.sealed import ChatSeal, MissingDataKeyError
from ctxstore._core.format.tokens import flags_of
from ctxstore._core.format.versions import SEALED_FORMAT
from ctxstore._core.keys import ChatKeys
from ctxstore._core.ops import owner_records
from ctxstore._core.ops.chats import chat_context, keys_for
from ctxstore._core.ops.data_keys import fresh_seal
from ctxstore._core.ops.verify.tokens import check_summaries, check_token_entries
from ctxstore._core.protocol import (
    Arg,
    Call,
    Operation,
    command_call,
    raise_first_error,
    script_call,
)
from ctxstore._core.scripts import load_script
from ctxstore._core.state import StoreState
from ctxstore.errors import (
    ChatNotFoundError,
    ConfigurationError,
    ConflictError,
    CorruptionError,
    FormatError,
    InvalidIdError,
)
from ctxstore.models import Problem, VerifyReport

#: How often a read or a repair is tried again when a write lands in the middle of it.
ATTEMPTS = 3
#: How many differing entries a problem about a whole key names before it just counts.
EXAMPLES = 3


# --- reading ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Snapshot:
    """Every key of one chat as read, plus the chat's scores in the two indexes."""

    keys: ChatKeys
    chat: dict[str, Any]
    branches: dict[str, Any]
    checkpoints: dict[str, Any]
    alias: dict[str, Any]
    runs: list[tuple[str, float]]
    records: list[bytes]
    tok: bytes
    summaries: list[tuple[bytes, float]]
    #: index key -> the chat's score there (None: not listed); the owner's index only when the
    #: chat hash names a valid owner
    scores: dict[str, float | None]
    #: the chat's entry in its owner's record (None: not recorded, or no valid owner to look in)
    recorded: str | None = None

    #: (key, name as shown) of every hash field whose name is not UTF-8
    bad_names: tuple[tuple[str, str], ...] = ()

    def field(self, name: str) -> str | None:
        """A chat field as text (bytes that are not UTF-8 shown escaped: the field checks
        report them)."""
        raw = self.chat.get(name)
        return None if raw is None else _shown(raw)

    @property
    def incarnation(self) -> str | None:
        return self.field("inc")


def _key_calls(keys: ChatKeys) -> tuple[Call[Any], ...]:
    """The chat hash first and last: a write between them shows as a difference (every write
    that moves the log, alias, runs or branches changes the chat hash) and the read is tried
    again. Checkpoint records are checked again by the repair script itself."""
    chat = keys.key("chat")

    def read(*args: Arg) -> Call[Any]:
        return command_call(args, keys=(str(args[1]),))

    return (
        read("HGETALL", chat),
        read("LLEN", keys.key("log")),
        read("HGETALL", keys.key("branch")),
        read("HGETALL", keys.key("checkpoint")),
        read("HGETALL", keys.key("alias")),
        read("ZRANGE", keys.key("runs"), 0, -1, "WITHSCORES"),
        read("GET", keys.key("tok")),
        read("ZRANGE", keys.key("summary"), 0, -1, "WITHSCORES"),
        read("HGETALL", chat),
    )


def _index_keys(state: StoreState, owner: str | None) -> tuple[str, ...]:
    if owner is None:
        return (state.keyspace.all_chats_index,)
    try:
        return state.keyspace.indexes_of(owner)
    except InvalidIdError:  # reported as a problem of the chat hash
        return (state.keyspace.all_chats_index,)


def _record_calls(
    state: StoreState, keys: ChatKeys, length: int, indexes: Sequence[str], record: str
) -> tuple[Call[Any], ...]:
    """LRANGEs of at most ``read_chunk_messages`` records, the incarnation and ``updated_at``
    (a write since the first read moved them, and maybe the index scores: read again), the
    index scores, the chat's entry in its owner's ``record``."""
    log, chat = keys.key("log"), keys.key("chat")
    chunk = state.limits.read_chunk_messages
    calls: list[Call[Any]] = [
        command_call(("LRANGE", log, start, min(start + chunk, length) - 1), keys=(log,))
        for start in range(0, length, chunk)
    ]
    calls.append(command_call(("HMGET", chat, "inc", "updated_at"), keys=(chat,)))
    calls += [command_call(("ZSCORE", index, keys.chat_id), keys=(index,)) for index in indexes]
    calls.append(command_call(("HGET", record, keys.chat_id), keys=(record,)))
    return tuple(calls)


def _owner_record(state: StoreState, owner: str | None) -> str:
    """The owner record to look the chat up in (a record of nobody's when there is no valid
    owner: never written, so the lookup finds nothing and the chat's hash is the problem)."""
    if owner is not None:
        try:
            return state.keyspace.owner_record(owner)
        except InvalidIdError:
            pass
    return state.keyspace.owner_record("-")


def _read(state: StoreState, keys: ChatKeys) -> Operation[_Snapshot]:
    """A consistent snapshot of the chat, read again while writes keep landing in the middle."""
    for _attempt in range(ATTEMPTS):
        outcomes = yield _key_calls(keys)
        raise_first_error(outcomes)
        first, length, branches, checkpoints, alias, runs, tok, summaries, last = outcomes
        bad_names: list[tuple[str, str]] = []
        chat = _names(first, keys.key("chat"), bad_names)
        if chat != _names(last, keys.key("chat"), []):
            continue
        owner = _owner(chat, keys.key("chat"))
        indexes = _index_keys(state, owner)
        tail = yield _record_calls(state, keys, int(length), indexes, _owner_record(state, owner))
        raise_first_error(tail)
        tail, recorded = tail[:-1], tail[-1]
        chunks, (inc, updated), scores = (
            tail[: -len(indexes) - 1],
            tail[-len(indexes) - 1],
            tail[-len(indexes) :],
        )
        if inc != chat.get("inc") or updated != chat.get("updated_at"):
            continue
        return _Snapshot(
            keys=keys,
            chat=chat,
            branches=_names(branches, keys.key("branch"), bad_names),
            checkpoints=_names(checkpoints, keys.key("checkpoint"), bad_names),
            alias=_names(alias, keys.key("alias"), bad_names),
            runs=_score_pairs(runs),
            records=[record for part in chunks for record in part],
            tok=tok or b"",
            summaries=[(member, float(score)) for member, score in scored_pairs(summaries)],
            scores={index: _score(score) for index, score in zip(indexes, scores, strict=True)},
            recorded=None if recorded is None or owner is None else text(recorded),
            bad_names=tuple(bad_names),
        )
    raise ConflictError(
        f"chat {keys.chat_id!r} kept changing while it was being verified; try again",
        chat_id=keys.chat_id,
    )


def _shown(raw: bytes | str) -> str:
    """Stored text for a report: bytes that are not UTF-8 come escaped, never as an error."""
    return raw if isinstance(raw, str) else raw.decode("utf-8", "backslashreplace")


def _names(
    reply: Sequence[Any] | Mapping[Any, Any], key: str, bad: list[tuple[str, str]]
) -> dict[str, Any]:
    """A hash reply with text names; names that are not UTF-8 are kept escaped and listed in
    ``bad`` (reported as problems; a repair rewrites nothing while there are any: it could not
    write such a name back)."""
    items = (
        reply.items() if isinstance(reply, Mapping) else zip(reply[::2], reply[1::2], strict=True)
    )
    named: dict[str, Any] = {}
    for name, value in items:
        try:
            named[text(name)] = value
        except UnicodeDecodeError:
            bad.append((key, _shown(name)))
            named[_shown(name)] = value
    return named


def _owner(chat: Mapping[str, Any], key: str) -> str | None:
    """The chat's owner when it is a valid user id (the index key is built from it), else None."""
    try:
        return check_owner(chat.get("user_id"), key)
    except CorruptionError:
        return None


def _score_pairs(reply: Sequence[Any]) -> list[tuple[str, float]]:
    """A ZRANGE WITHSCORES reply as (member, score) pairs, whether or not the client paired it."""
    return [(_shown(member), float(score)) for member, score in scored_pairs(reply)]


def _score(reply: Any) -> float | None:
    """A ZSCORE reply (bytes, or a float when the client parsed it; None when not a member)."""
    if reply is None:
        return None
    return float(text(reply) if isinstance(reply, bytes) else reply)


# --- what the records say --------------------------------------------------------------------


@dataclass
class _Log:
    """Per position: the parent, the chosen id and the chain length (None where a broken record
    makes it unknown), and the problems of the records themselves."""

    parents: list[int | None] = field(default_factory=list)
    chosen: list[str | None] = field(default_factory=list)
    tags: list[str | None] = field(default_factory=list)
    depths: list[int | None] = field(default_factory=list)
    #: The token-entry flag each message's payload gives (None where the record is broken).
    flags: list[int | None] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    @property
    def sound(self) -> bool:
        return not self.problems

    def id_of(self, position: int, incarnation: str | None) -> str | None:
        """The message id at ``position``; None when its record (or the incarnation) is broken."""
        if self.depths[position] is None:
            return None
        chosen = self.chosen[position]
        if chosen is not None:
            return chosen
        tag = self.tags[position]
        if incarnation is None or tag is None:
            return None
        return derived_id(position, incarnation, tag)


def _decode(
    raw: bytes, key: str, position: int, seal: ChatSeal | None
) -> tuple[int, str | None, str, int | None] | Problem:
    """The parent, chosen id, tag and token-entry flag of one record (opened with ``seal``, a
    sealed chat's: a record that does not open where it stands is a problem too), or why it is
    not a message record. A sealed record with nothing to open it (a store without the keys,
    a chat whose owner or incarnation is broken) is checked up to its values: its flag is
    unknown (None)."""
    try:
        parent, _created_at, payload, chosen, tag = read_record(raw, key, position, seal)
    except CorruptionError as error:
        return Problem("record", key, str(position), str(error.details["reason"]))
    except MissingDataKeyError as missing:
        reason = f"sealed with key {missing.key_id!r}, not a data key of the chat's owner"
        return Problem("record", key, str(position), reason)
    except ConfigurationError:  # sealed values, and nothing here opens them
        return _closed(raw, key, position)
    return parent, chosen, tag, flags_of(payload)


def _closed(raw: bytes, key: str, position: int) -> tuple[int, str | None, str, None] | Problem:
    """A sealed record checked as a record, its sealed values left closed."""
    record = msgpack.unpackb(raw, raw=False, strict_map_key=False)
    record[2] = {}
    if len(record) == 6:
        record[3] = {}
    try:
        parent, _created_at, _payload, chosen, tag = record_fields(record, key, position)
    except CorruptionError as error:
        return Problem("record", key, str(position), str(error.details["reason"]))
    return parent, chosen, tag, None


def _scan_log(snapshot: _Snapshot, pause_gc: bool, seal: ChatSeal | None = None) -> _Log:
    """Decode every record on its own, so one broken record is one problem, not a crash."""
    key = snapshot.keys.key("log")
    log = _Log()
    seen: dict[str, int] = {}
    with gc_paused(len(snapshot.records), pause=pause_gc):
        for position, raw in enumerate(snapshot.records):
            decoded = _decode(raw, key, position, seal)
            if isinstance(decoded, Problem):
                log.problems.append(decoded)
                log.parents.append(None)
                log.chosen.append(None)
                log.tags.append(None)
                log.depths.append(None)
                log.flags.append(None)
                continue
            parent, chosen, tag, flags = decoded
            log.parents.append(parent)
            log.chosen.append(chosen)
            log.tags.append(tag)
            log.flags.append(flags)
            log.depths.append(_depth(log, key, position, parent))
            if chosen is not None:
                _check_chosen(log, key, position, chosen, seen, snapshot.incarnation)
    return log


def _depth(log: _Log, key: str, position: int, parent: int) -> int | None:
    """The chain length at ``position``: a parent must be -1 (a root) or an older position,
    which also rules out cycles."""
    if parent == -1:
        return 1
    if parent < -1:
        log.problems.append(
            Problem("parent", key, str(position), f"names parent position {parent}, which is none")
        )
        return None
    if parent >= position:
        log.problems.append(
            Problem(
                "cycle",
                key,
                str(position),
                f"names parent position {parent}, not older than itself (a cycle)",
            )
        )
        return None
    above = log.depths[parent]
    return None if above is None else above + 1


def _check_chosen(
    log: _Log, key: str, position: int, chosen: str, seen: dict[str, int], inc: str | None
) -> None:
    if chosen == "":
        detail = "holds an empty chosen id"
    elif inc is not None and is_generated_id(chosen, inc):
        detail = f"holds the chosen id {chosen!r}, of the form this chat generates"
    elif chosen in seen:
        detail = f"holds the chosen id {chosen!r}, already used at position {seen[chosen]}"
    else:
        seen[chosen] = position
        return
    log.problems.append(Problem("id", key, str(position), detail))


# --- what the derived keys should say ------------------------------------------------------------


@dataclass
class _Findings:
    """The problems found, and the rewrites of derived keys that would fix the derivable ones."""

    problems: list[Problem] = field(default_factory=list)
    alias: dict[str, int] | None = None
    runs: dict[str, int] | None = None
    #: name -> (record as read, record rebuilt)
    branches: dict[str, tuple[bytes, str]] = field(default_factory=dict)
    checkpoints: dict[str, tuple[bytes, str]] = field(default_factory=dict)
    counters: list[str] = field(default_factory=list)
    indexes: list[str] = field(default_factory=list)
    #: the owner record the chat is missing from ("" when it is recorded)
    record: str = ""
    #: position -> the token-entry flag its message's payload gives
    flags: dict[int, int] = field(default_factory=dict)

    def add(self, kind: str, key: str, name: str, detail: str) -> None:
        self.problems.append(Problem(kind, key, name, detail))


def _examples(items: Iterable[str]) -> str:
    listed = sorted(items)
    shown = ", ".join(repr(item) for item in listed[:EXAMPLES])
    return shown + (f" and {len(listed) - EXAMPLES} more" if len(listed) > EXAMPLES else "")


def _compare(found: _Findings, kind: str, key: str, actual: set[str], expected: set[str]) -> bool:
    """Reports entries missing from and extra in a whole key; True when they differ."""
    missing, extra = expected - actual, actual - expected
    if missing:
        found.add(kind, key, "", f"{_entries(len(missing))} missing: {_examples(missing)}")
    if extra:
        found.add(
            kind, key, "", f"{_entries(len(extra))} the records do not imply: {_examples(extra)}"
        )
    return bool(missing or extra)


def _entries(count: int) -> str:
    return f"{count} {'entry' if count == 1 else 'entries'}"


def _check_alias(found: _Findings, snapshot: _Snapshot, log: _Log) -> None:
    """``alias`` holds exactly the chosen ids of the records, each at its position."""
    expected: dict[str, int] = {}
    for position, chosen in enumerate(log.chosen):
        if chosen is not None:
            expected.setdefault(chosen, position)
    actual = {f"{name}={_shown(value)}" for name, value in snapshot.alias.items()}
    wanted = {f"{name}={position}" for name, position in expected.items()}
    if _compare(found, "alias", snapshot.keys.key("alias"), actual, wanted):
        found.alias = expected


def _expected_runs(log: _Log) -> dict[str, int]:
    """member -> start: a run starts at every root and every message not the child of the one
    before it."""
    runs: dict[str, int] = {}
    for position, (parent, depth) in enumerate(zip(log.parents, log.depths, strict=True)):
        if parent is None or depth is None:
            continue
        if parent == -1 or parent != position - 1:
            runs[run_member(position, parent, depth)] = position
    return runs


def _check_runs(found: _Findings, snapshot: _Snapshot, log: _Log) -> None:
    expected = _expected_runs(log)
    actual = {f"{member}@{score:g}" for member, score in snapshot.runs}
    wanted = {f"{member}@{start}" for member, start in expected.items()}
    if _compare(found, "runs", snapshot.keys.key("runs"), actual, wanted):
        found.runs = expected


def _check_branches(found: _Findings, snapshot: _Snapshot, log: _Log) -> None:
    """Each head exists (or is -1 for an empty branch) and its id and chain length are the ones
    of its position; the active branch is one of them."""
    key = snapshot.keys.key("branch")
    for name, raw in sorted(snapshot.branches.items()):
        fields = loose_fields(raw, 5, (0, 2, 3, 4))
        if fields is None:
            found.add("branch", key, name, "not a branch record")
            continue
        position, head, created, seq, length = fields
        if position == -1:
            head_id: str | None = ""
            depth: int | None = 0
        elif 0 <= position < len(log.depths):
            head_id, depth = log.id_of(position, snapshot.incarnation), log.depths[position]
        else:
            found.add("branch", key, name, f"head position {position} is not in the log")
            continue
        if head_id is None or depth is None:
            continue  # the record at the head is broken, and reported as such
        stale = []
        if head != head_id:
            stale.append(f"head id {head!r}, the message at {position} is {head_id!r}")
        if length != depth:
            stale.append(f"chain length {length}, the chain of {position} holds {depth}")
        if stale:
            found.add("branch", key, name, "; ".join(stale))
            rebuilt = BranchRecord(position, head_id or None, created, seq, depth)
            found.branches[name] = (raw, branch_text(rebuilt))
    active = snapshot.field("active_branch")
    if active not in snapshot.branches:
        found.add(
            "active_branch",
            snapshot.keys.key("chat"),
            "active_branch",
            f"names {active!r}, which is no branch of the chat",
        )


def _check_checkpoints(found: _Findings, snapshot: _Snapshot, log: _Log) -> None:
    key = snapshot.keys.key("checkpoint")
    for name, raw in sorted(snapshot.checkpoints.items()):
        fields = loose_fields(raw, 4, (0, 2, 3))
        if fields is None or fields[0] < 0 or not fields[1]:
            found.add("checkpoint", key, name, "not a checkpoint record")
            continue
        position, message_id, created, seq = fields
        if position >= len(log.depths):
            found.add("checkpoint", key, name, f"position {position} is not in the log")
            continue
        expected = log.id_of(position, snapshot.incarnation)
        if expected is not None and message_id != expected:
            found.add(
                "checkpoint",
                key,
                name,
                f"message id {message_id!r}, the message at {position} is {expected!r}",
            )
            found.checkpoints[name] = (raw, checkpoint_text(position, expected, created, seq))


def _check_counters(found: _Findings, snapshot: _Snapshot) -> None:
    key = snapshot.keys.key("chat")
    for name, actual, source in (
        ("message_count", len(snapshot.records), "LLEN log"),
        ("branch_count", len(snapshot.branches), "HLEN branch"),
    ):
        stored = snapshot.field(name)
        if stored != str(actual):
            found.add("count", key, name, f"says {stored!r}, {source} is {actual}")
            found.counters.append(name)


def _check_chat(found: _Findings, snapshot: _Snapshot) -> bool:
    """Owner, layout and incarnation; False when the chat hash cannot be trusted for repairs."""
    key = snapshot.keys.key("chat")
    if not snapshot.chat:
        found.add("chat", key, "", "the chat hash is missing while other keys of the chat exist")
        return False
    sound = True
    for name, check in (
        ("user_id", check_owner),
        ("fmt", check_format),
        ("inc", check_incarnation),
    ):
        try:
            check(snapshot.chat.get(name), key)
        except CorruptionError as error:
            found.add("chat", key, name, f"is {snapshot.field(name)!r}: {_reason(error)}")
            sound = False
        except FormatError as error:  # another release's chat: reported, never repaired
            found.add("format", key, name, error.message)
            sound = False
    _check_chat_fields(found, snapshot)
    return sound


def _reason(error: CorruptionError) -> str:
    return error.message.rpartition(": ")[2]


def _check_chat_fields(found: _Findings, snapshot: _Snapshot) -> None:
    """Every other field a reader or a script parses: counts, text, metadata, usage, markers."""
    key = snapshot.keys.key("chat")
    for bad_key, name in snapshot.bad_names:
        found.add("name", bad_key, name, "a field name that is not UTF-8")
    for name, raw in sorted(snapshot.chat.items()):
        try:
            check_chat_field(name, raw, key)
        except CorruptionError as error:
            found.add("chat", key, name, f"is {_shown(raw)[:64]!r}: {_reason(error)}")


def _check_sealed_chat_values(found: _Findings, snapshot: _Snapshot, seal: ChatSeal) -> None:
    """A sealed chat's title and metadata values open where they stand (the fields'
    shapes are :func:`_check_chat_fields`'s)."""
    key = snapshot.keys.key("chat")
    for name, raw in sorted(snapshot.chat.items()):
        try:
            if name == "title":
                seal.open_title(text(raw), key=key)
            elif name.startswith(METADATA_PREFIX):
                value = msgpack.unpackb(bytes(raw), raw=False)
                seal.open_metadata(name[len(METADATA_PREFIX) :], value, key=key)
        except CorruptionError as error:
            found.add("chat", key, name, _reason(error))
        except MissingDataKeyError as missing:
            found.add(
                "chat", key, name, f"sealed with {missing.key_id!r}, no data key of the owner's"
            )
        except (ValueError, TypeError):  # not a value at all: _check_chat_fields reports it
            continue


def _check_indexes(found: _Findings, snapshot: _Snapshot) -> None:
    """The chat is listed in the namespace index and its owner's, scored by ``updated_at``."""
    updated = snapshot.field("updated_at")
    try:
        field_count(snapshot.chat.get("updated_at"), snapshot.keys.key("chat"), "updated_at")
    except CorruptionError:
        found.add("chat", snapshot.keys.key("chat"), "updated_at", f"is {updated!r}, not a time")
        return
    for index, score in snapshot.scores.items():
        if score is None:
            found.add("index", index, snapshot.keys.chat_id, "the chat is not listed")
        elif score != int(str(updated)):
            found.add(
                "index",
                index,
                snapshot.keys.chat_id,
                f"listed at {score:.0f}, the chat was updated at {updated}",
            )
        else:
            continue
        found.indexes.append(index)


def _check_owner_record(found: _Findings, state: StoreState, snapshot: _Snapshot) -> None:
    """The chat is named in its owner's record (the list erasure walks)."""
    owner = _owner(snapshot.chat, snapshot.keys.key("chat"))
    if owner is None or snapshot.recorded is not None:
        return
    record = _owner_record(state, owner)
    found.add("owner record", record, snapshot.keys.chat_id, "the chat is not recorded")
    found.record = record


# --- verifying and repairing -----------------------------------------------------------------


@dataclass(frozen=True)
class _Plan:
    """The rewrites a repair makes: only what the records (and the chat hash) determine."""

    alias: dict[str, int] | None
    runs: dict[str, int] | None
    branches: dict[str, tuple[bytes, str]]
    checkpoints: dict[str, tuple[bytes, str]]
    counters: tuple[str, ...]
    indexes: tuple[str, ...]
    flags: dict[int, int] = field(default_factory=dict)
    #: the owner record to add the chat to ("" for none)
    record: str = ""

    @property
    def in_chat(self) -> bool:
        """Whether anything in the chat's own slot is rewritten (the repair script runs)."""
        return bool(
            self.alias is not None
            or self.runs is not None
            or self.branches
            or self.checkpoints
            or self.counters
            or self.flags
        )

    @property
    def empty(self) -> bool:
        return not self.in_chat and not self.indexes and not self.record

    def names(self) -> tuple[str, ...]:
        """What a repair rebuilt, for the report."""
        done = [
            name
            for name, rebuilt in (("alias", self.alias), ("runs", self.runs))
            if rebuilt is not None
        ]
        done += [f"branch {name!r}" for name in self.branches]
        done += [f"checkpoint {name!r}" for name in self.checkpoints]
        done += list(self.counters)
        done += [f"token flag at {position}" for position in sorted(self.flags)]
        done += [f"index {index}" for index in self.indexes]
        done += [f"owner record {self.record}"] if self.record else []
        return tuple(done)


def _plan(found: _Findings, chat_sound: bool, log_sound: bool) -> _Plan:
    """The repairs that are safe: none without a sound chat hash (the repair checks the
    incarnation, and generated ids need it), and nothing derived from the records while any
    record is broken (the rebuild would be as wrong as the records)."""
    derive = chat_sound and log_sound
    return _Plan(
        alias=found.alias if derive else None,
        runs=found.runs if derive else None,
        branches=found.branches if derive else {},
        checkpoints=found.checkpoints if derive else {},
        counters=tuple(found.counters) if chat_sound else (),
        indexes=tuple(found.indexes) if chat_sound else (),
        flags=found.flags if derive else {},
        record=found.record if chat_sound else "",
    )


def _check(
    state: StoreState, snapshot: _Snapshot, pause_gc: bool = True, seal: ChatSeal | None = None
) -> tuple[VerifyReport, _Plan]:
    """Every invariant of the snapshot: the report, and the plan that would repair it."""
    found = _Findings()
    chat_sound = _check_chat(found, snapshot)
    log = _scan_log(snapshot, pause_gc, seal)
    found.problems += log.problems
    _check_alias(found, snapshot, log)
    _check_runs(found, snapshot, log)
    _check_branches(found, snapshot, log)
    _check_checkpoints(found, snapshot, log)
    found.flags = check_token_entries(
        found.add, snapshot.keys.key("tok"), snapshot.tok, log.parents, log.flags
    )
    check_summaries(
        found.add,
        snapshot.keys.key("summary"),
        snapshot.summaries,
        lambda position: log.id_of(position, snapshot.incarnation),
        len(snapshot.records),
        seal,
    )
    if snapshot.chat:
        if seal is not None:
            _check_sealed_chat_values(found, snapshot, seal)
        _check_counters(found, snapshot)
        _check_indexes(found, snapshot)
        _check_owner_record(found, state, snapshot)
    report = VerifyReport(
        chat_id=snapshot.keys.chat_id,
        messages=len(snapshot.records),
        branches=len(snapshot.branches),
        problems=tuple(found.problems),
    )
    return report, _plan(found, chat_sound, log.sound and not snapshot.bad_names)


def _flat(entries: Mapping[str, int], *, score_first: bool) -> list[Arg]:
    args: list[Arg] = []
    for name, number in entries.items():
        args += [number, name] if score_first else [name, number]
    return args


def _triples(rewrites: Mapping[str, tuple[bytes, str]]) -> list[Arg]:
    args: list[Arg] = []
    for name, (read, rebuilt) in rewrites.items():
        args += [name, read, rebuilt]
    return args


def _repair_call(snapshot: _Snapshot, plan: _Plan) -> Call[tuple[str, int]]:
    alias = [] if plan.alias is None else _flat(plan.alias, score_first=False)
    runs = [] if plan.runs is None else _flat(plan.runs, score_first=True)
    branches, checkpoints = _triples(plan.branches), _triples(plan.checkpoints)
    script = load_script("repair_chat")
    return script_call(
        script,
        keys_for(script, snapshot.keys),
        (
            snapshot.incarnation or "",
            len(snapshot.records),
            -1 if plan.alias is None else len(alias),
            -1 if plan.runs is None else len(runs),
            len(branches),
            len(checkpoints),
            " ".join(f"{position}:{flag}" for position, flag in sorted(plan.flags.items())),
            *alias,
            *runs,
            *branches,
            *checkpoints,
        ),
        parse=lambda reply: (text(reply[0]), reply[1]),
        context=chat_context(snapshot.keys.chat_id),
        writes=True,
    )


def _repair(state: StoreState, snapshot: _Snapshot, plan: _Plan) -> Operation[tuple[str, ...]]:
    """The chat's own keys in one script (it refuses if a write landed since the read), then the
    index entries, which live in other slots."""
    updated_at: Any = snapshot.chat.get("updated_at")
    if plan.in_chat:
        _owner_id, updated_at = yield _repair_call(snapshot, plan)
    if plan.indexes:
        updated_at = field_count(updated_at, snapshot.keys.key("chat"), "updated_at")
        chat_id = snapshot.keys.chat_id
        outcomes = yield tuple(
            command_call(("ZADD", index, updated_at, chat_id), keys=(index,))
            for index in plan.indexes
        )
        raise_first_error(outcomes)
    owner = _owner(snapshot.chat, snapshot.keys.key("chat"))
    if plan.record and owner is not None:
        yield owner_records.record_call(
            state, owner, snapshot.keys.chat_id, snapshot.incarnation or "", state.clock()
        )
    return plan.names()


def verify_chat(
    state: StoreState, chat_id: str, *, repair: bool = False
) -> Operation[VerifyReport]:
    """Check every invariant of the chat; with ``repair``, rebuild what its records determine
    and return the report of a second verification, with ``repaired`` naming what was rebuilt.

    A chat whose keys are all absent does not exist (:class:`ChatNotFoundError`). A write that
    lands during the repair makes it start over from a fresh read (a few times at most).
    """
    keys = state.keyspace.chat(chat_id)
    for _attempt in range(ATTEMPTS):
        snapshot = yield from _read(state, keys)
        _require_chat(snapshot)
        seal = yield from _seal_of(state, snapshot)
        report, plan = _check(state, snapshot, state.settings.pause_gc, seal)
        if not repair or plan.empty:
            return report
        try:
            repaired = yield from _repair(state, snapshot, plan)
        except ConflictError:
            continue
        again = yield from _read(state, keys)
        after, _plan_after = _check(
            state, again, state.settings.pause_gc, (yield from _seal_of(state, again))
        )
        return replace(after, repaired=repaired)
    raise ConflictError(
        f"chat {chat_id!r} kept changing while it was being repaired; try again", chat_id=chat_id
    )


def _seal_of(state: StoreState, snapshot: _Snapshot) -> Operation[ChatSeal | None]:
    """What opens the records of a sealed chat (its owner's keys), None for a chat in the
    clear; a store without encryption checks a sealed chat's records up to their payloads,
    which it refuses (``ConfigurationError``)."""
    owner, incarnation = snapshot.field("user_id"), snapshot.incarnation
    if snapshot.field("fmt") != SEALED_FORMAT or owner is None or incarnation is None:
        return None
    seal: ChatSeal | None = yield from fresh_seal(state, snapshot.keys.chat_id, owner, incarnation)
    return seal


def _require_chat(snapshot: _Snapshot) -> None:
    present = (
        snapshot.chat,
        snapshot.records,
        snapshot.branches,
        snapshot.checkpoints,
        snapshot.alias,
        snapshot.runs,
    )
    if not any(present):
        chat_id = snapshot.keys.chat_id
        raise ChatNotFoundError(f"chat {chat_id!r} does not exist", chat_id=chat_id)
