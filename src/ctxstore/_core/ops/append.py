"""Message operations: append (with head compare-and-set), read one, read a chain."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple, get_args

from ctxstore._base.ids import check_name
from ctxstore._core import telemetry
from ctxstore._core.format.codec import encode
from ctxstore._core.format.fields import text
from ctxstore._core.format.records import (
    check_metadata,
    check_payload,
    derived_id,
    encode_record,
    packed_time,
)
from ctxstore._core.format.sealed import (
    METADATA,
    PAYLOAD,
    ChatSeal,
    Layout,
    Place,
    ResealNeededError,
    predicted_layout,
)
from ctxstore._core.format.tokens import token_entries
from ctxstore._core.ids import (
    check_request_id,
    hashed_id,
    id_hasher,
    new_request_id,
    new_tags,
    tags_for,
)
from ctxstore._core.keyring import OwnerKeys
from ctxstore._core.ops.chats import (
    chat_context,
    check_title,
    keys_for,
    scope_args,
    touch_indexes,
    with_touch,
)
from ctxstore._core.ops.data_keys import chat_owner, owner_keys
from ctxstore._core.ops.jobs import enqueue_compaction
from ctxstore._core.protocol import MAX_COMMAND_ARGUMENTS, Operation, script_call
from ctxstore._core.scripts import load_script
from ctxstore._core.state import StoreState
from ctxstore.crypto.aead import random_key
from ctxstore.crypto.seal import SealingKey
from ctxstore.errors import ConflictError, ValidationError
from ctxstore.messages.tokens import MessageCounter
from ctxstore.models import (
    AppendResult,
    CompactionTrigger,
    ConflictPolicy,
    ExistingPolicy,
    MessageInput,
    NewMessage,
)
from ctxstore.ui.parts import is_ui_message
from ctxstore.ui.validation import check_ui_message


def own_id(item: object, where: str) -> tuple[object, str]:
    """A plain dict's payload and chosen message id. A chat message's string ``"id"`` (a
    message from a chat UI) names the message, so appending it again is recognized
    (``MessageExistsError``, or an edit with ``on_existing="fork"``), and leaves the stored
    dict: Chat Completions refuses unknown message keys. An item with a ``"type"`` (a Responses
    item) is stored exactly as given under a generated id: that API wants its ids back, and
    agent frameworks repeat them (the Agents SDK's ``"__fake_id__"``). ``NewMessage`` stores
    any dict as given, under a generated or chosen id."""
    if not isinstance(item, Mapping) or "id" not in item or "type" in item:
        return item, ""
    chosen = item["id"]
    if not isinstance(chosen, str):
        raise ValidationError(
            f"{where} has an 'id' of type {type(chosen).__name__}; a message id is a string "
            "(or pass NewMessage(message) to store the dict as it is under a generated id)"
        )
    check_name(chosen, f"{where} id")
    return {key: value for key, value in item.items() if key != "id"}, chosen


def check_policy(value: object, allowed: tuple[str, ...], what: str) -> str:
    if value not in allowed:
        raise ValidationError(f"{what} must be one of {allowed}, got {value!r}")
    return str(value)


class AppendArgs(NamedTuple):
    """What an append sends besides its call fields, built and checked before anything is."""

    chosen_ids: list[str]
    tags: list[str]
    records: list[bytes]
    entries: bytes
    #: Of the messages as the caller gave them (chosen ids, payloads, metadata): what a retry
    #: under the same request id must match.
    digest: str
    #: Each message's payload and metadata, encoded (a sealed chat's records are built from
    #: them once their place is known), and the records' shared created_at.
    bodies: list[tuple[bytes, bytes]]
    created: bytes


def append_args(
    state: StoreState,
    messages: Iterable[MessageInput],
    *,
    now: int,
    request: str | None,
    count_tokens: MessageCounter | None = None,
    base: int = 0,
    any_items: bool = False,
) -> AppendArgs:
    """The chosen ids ("" for each generated one), the tags, the records, the token entries
    (counted with ``count_tokens``, else the store's counter) and the messages' digest;
    everything is validated and encoded before anything is sent.

    The client builds each record whole, as the child of the position before it
    (:func:`~ctxstore._core.format.records.encode_record`), so the script touches only the
    few whose parent is elsewhere. With ``request`` (a caller's or an engine's request id,
    which a retry of the write carries again) the tags come from it and the messages' digest
    (:func:`~ctxstore._core.ids.tags_for`), so a retry builds the same records, and the digest
    goes to the script, which refuses the id used with other messages; without one (a call's
    own id, which only redis-py's resend of the same command carries) the tags are random and
    nothing is hashed. ``any_items``: opaque items are taken too (see
    :func:`~ctxstore._core.format.records.check_payload`).
    """
    items = list(messages)
    if not items:
        raise ValidationError("append needs at least one message")
    if len(items) > state.limits.max_batch:
        raise ValidationError(
            f"append takes at most {state.limits.max_batch} messages at once, got {len(items)}"
        )
    created = packed_time(now)
    limit = state.limits.max_message_bytes
    chosen_ids: list[str] = []
    bodies: list[tuple[bytes, bytes]] = []
    seen: set[str] = set()
    payloads: list[dict[str, Any]] = []
    hasher = id_hasher() if request is not None else None
    for index, item in enumerate(items):
        where = f"messages[{index}]"
        metadata = b""
        if isinstance(item, NewMessage):
            payload: object = item.message
            chosen = "" if item.id is None else check_name(item.id, f"{where} id")
            if item.metadata:
                metadata = encode(
                    check_metadata(item.metadata, where), what=f"{where} metadata", limit=limit
                )
        else:
            payload, chosen = own_id(item, where)
        if chosen:
            if chosen in seen:
                raise ValidationError(f"{where} repeats message id {chosen!r}")
            seen.add(chosen)
        chosen_ids.append(chosen)
        if isinstance(payload, Mapping) and is_ui_message(payload):
            # A UI message comes from a browser: its parts are checked as the AI SDK checks
            # them before anything is sent (its id is the chosen one, or generated).
            check_ui_message({**payload, "id": chosen or "generated"}, index)
        checked = check_payload(payload, where, any_item=any_items)
        payloads.append(checked)
        body = encode(checked, what=where, limit=limit)
        bodies.append((body, metadata))
        if hasher is not None:
            hasher.update(
                b"%d:%s:%d:%d:" % (len(chosen), chosen.encode(), len(body), len(metadata))
            )
            hasher.update(body)
            hasher.update(metadata)
    if hasher is None or request is None:
        digest, tags = "", new_tags(len(items))
    else:
        digest = hashed_id(hasher)
        tags = tags_for(request, digest, len(items))
    records = [
        encode_record(body, created_at=created, tag=tag, chosen=chosen, metadata=metadata)
        for (body, metadata), tag, chosen in zip(bodies, tags, chosen_ids, strict=True)
    ]
    entries = token_entries(payloads, count_tokens or state.message_tokens, base)
    return AppendArgs(chosen_ids, tags, records, entries, digest, bodies, created)


def append(
    state: StoreState,
    chat_id: str,
    branch: str | None,
    messages: Iterable[MessageInput],
    *,
    expected_head: str | None,
    on_conflict: ConflictPolicy = "raise",
    on_existing: ExistingPolicy = "raise",
    user_id: str | None = None,
    incarnation: str | None = None,
    count_tokens: MessageCounter | None = None,
    compaction: CompactionTrigger | None = None,
    title_if_none: str | None = None,
    any_items: bool = False,
    request_id: str | None = None,
    recall: bool | None = None,
) -> Operation[AppendResult]:
    """Append in order and move the head, in one script; see ``lua/append.lua`` for the policies.
    ``branch`` None writes to the branch that is active when the script runs.

    ``user_id`` refuses another owner's chat and ``incarnation`` a chat re-created since the
    caller knew it (both inside the script). The request id makes a resent call (after a lost
    reply) answer like the first time instead of writing twice. ``compaction``: when the append
    takes the branch's context to its threshold, the script sets the chat's job marker (once)
    and, on a single server, adds the job to its stream; elsewhere the job follows the reply.
    ``title_if_none``: the title the chat takes in the same call if it has none yet.
    ``any_items``: opaque items (neither ``role`` nor ``type``) are taken too, for the adapters
    of frameworks whose sessions store any item. ``request_id``: the caller's own (see
    :meth:`~ctxstore.store.Store.append`); without one, each call makes its own, which covers
    redis-py's resends only. ``recall``: look the id up whatever the head (default: for a
    caller's id, which may be retried after anything; an engine's own id is retried only by
    the engine, onto the head it knew, and skips the lookup on the hot path).
    """
    chat = state.keyspace.chat(chat_id)
    if branch is not None:
        check_name(branch, "branch")
    if expected_head is not None:
        check_name(expected_head, "expected_head")
    check_policy(on_conflict, _CONFLICT_POLICIES, "on_conflict")
    check_policy(on_existing, _EXISTING_POLICIES, "on_existing")
    title = "" if title_if_none is None else check_title(title_if_none)
    own = None if request_id is None else check_request_id(request_id)
    request = own or new_request_id()
    now = state.clock()
    base = 0 if expected_head is None else state.head_sizes.get(chat_id, expected_head)
    built = append_args(
        state,
        messages,
        now=now,
        request=own,
        count_tokens=count_tokens,
        base=base,
        any_items=any_items,
    )
    chosen_ids, tags, records, entries, digest = built[:5]
    script = load_script("append")
    owner = user_id if user_id is not None else state.owners.get(chat_id)
    keys = keys_for(script, chat)
    in_script_index = owner is not None and not state.cluster
    if in_script_index:
        keys = (
            *keys,
            *state.keyspace.indexes_of(owner or ""),
            *state.keyspace.job_keys(chat_id),
        )
    user, known_inc = scope_args(user_id, incarnation)
    fields = AppendCall(
        user=user,
        inc=known_inc,
        branch=branch or "",
        expected=expected_head or "",
        on_conflict=on_conflict,
        on_existing=on_existing,
        now=str(now),
        request=request,
        chat_id=chat_id if in_script_index else "",
        index_owner=(owner or "") if in_script_index else "",
        soft_tokens=str(compaction.soft_tokens) if compaction is not None else "",
        job_ttl=str(compaction.job_ttl_ms) if compaction is not None else "",
        keep=str(compaction.min_recent_messages) if compaction is not None else "",
        base=str(base),
        digest=digest,
        recall="1" if (request_id is not None if recall is None else recall) else "",
        trace=telemetry.traceparent() if compaction is not None else "",
        seal="",
    )

    def send(records: list[bytes], fields: AppendCall, title: str) -> Operation[_Appended]:
        call = script_call(
            script,
            keys,
            ("\t".join(fields), "\t".join(chosen_ids), entries, title, *record_arguments(records)),
            parse=lambda reply: _parse_append(reply, chosen_ids, tags),
            context=chat_context(chat_id),
            writes=True,
        )
        if in_script_index:
            appended: _Appended = yield call
            state.owners.remember(chat_id, appended[1])
            if not appended[2]:
                yield from touch_indexes(state, chat_id, appended[1], appended[0].updated_at)
            return appended
        touched: _Appended = yield from with_touch(
            state,
            chat_id,
            call,
            now,
            owner_of=lambda reply: reply[1],
            updated_at_of=lambda reply: reply[0].updated_at,
        )
        return touched

    if state.settings.encryption is None:
        result, _owner, _indexed, enqueued, head_tokens = yield from send(records, fields, title)
    else:
        result, _owner, _indexed, enqueued, head_tokens = yield from sealed_append(
            state, chat_id, owner, incarnation, expected_head, built, fields, title, send
        )
    state.head_sizes.remember(chat_id, result.head_message_id, head_tokens)
    if compaction is not None and result.compaction_job is not None and not enqueued:
        yield from enqueue_compaction(
            state, chat_id, result.branch, result.compaction_job, compaction, fields.trace
        )
    appended: AppendResult = result
    return appended


_Appended = tuple[AppendResult, str, bool, bool, int]
#: How many times an append seals its records again for a place that moved under it (each
#: time another writer appended between the script's answer and the call again). Each round
#: one of the writers racing on a chat gets through, so a writer of n keeps losing with
#: probability about ((n-1)/n)^k: eight processes appending to one chat in a tight loop (the
#: concurrency tests) lose 64 rounds in a row once in a few thousand appends, 1,000 never.
MAX_RESEALS = 1000


def sealed_append(
    state: StoreState,
    chat_id: str,
    owner: str | None,
    incarnation: str | None,
    expected_head: str | None,
    built: AppendArgs,
    fields: AppendCall,
    title: str,
    send: Callable[[list[bytes], AppendCall, str], Operation[_Appended]],
) -> Operation[_Appended]:
    """An append to a sealed chat: each record sealed under the owner's data key for the
    place it lands (see :mod:`ctxstore._core.format.sealed`). The place is predicted from what
    this process last saw of the chat; when the script finds another (a writer came between,
    a cold process), it writes nothing and names the right one, and the records are sealed for
    it and sent again: one more round trip, only then. A title is sealed with them, for the
    same incarnation."""
    user_id = yield from chat_owner(state, chat_id, owner)
    keys = yield from owner_keys(state, user_id)
    count = len(built.records)
    layout = predicted_layout(state.caches.places.get(chat_id), incarnation, expected_head, count)
    if keys.current is None:
        # The owner has no data key yet (its chat's open made none: a crash between): the
        # script is asked where the records land, with records sealed under a throwaway key
        # and a layout it never takes, so it refuses before any write; the key is made only
        # for a chat that takes them, and a refused append leaves nothing behind.
        probe = OwnerKeys(user_id, keys.subject, SealingKey(PROBE, random_key()), {})
        try:
            probe_records, probe_title = _sealed(built, probe, chat_id, state, layout, title)
            probed = yield from send(probe_records, fields._replace(seal=PROBE), probe_title)
        except ResealNeededError as moved:
            layout = Layout.parse(moved.layout, count)
        else:
            return probed  # a resend of a write applied before, answered from its ring
        keys = yield from owner_keys(state, user_id, create=True)
    for _attempt in range(MAX_RESEALS):
        records, sealed_title = _sealed(built, keys, chat_id, state, layout, title)
        try:
            appended = yield from send(records, fields._replace(seal=layout.field()), sealed_title)
        except ResealNeededError as moved:
            layout = Layout.parse(moved.layout, count)
            continue
        if not appended[0].resent:
            last = layout.first + count - 1
            place = Place(layout.incarnation, last + 1, appended[0].head_message_id, last)
            state.caches.places.remember(chat_id, place)
        return appended
    raise ConflictError(
        f"chat {chat_id!r} kept moving while its records were sealed for their place "
        f"({MAX_RESEALS} tries): nothing was written",
        chat_id=chat_id,
        reason="reseal",
    )


#: The layout a probe of a sealed append sends (see :func:`sealed_append`): never one a script
#: writes, so the script names the right one and writes nothing.
PROBE = "probe"


def _sealed(
    built: AppendArgs,
    keys: OwnerKeys,
    chat_id: str,
    state: StoreState,
    layout: Layout,
    title: str,
) -> tuple[list[bytes], str]:
    """The append's records, each sealed for its place in ``layout``, and its title (if any)."""
    seal = ChatSeal(keys, state.keyspace.namespace, chat_id, layout.incarnation)
    records = [
        encode_record(
            seal.seal(PAYLOAD, body, layout.first + index, layout.parents[index]),
            created_at=built.created,
            tag=tag,
            chosen=chosen,
            metadata=(
                seal.seal(METADATA, metadata, layout.first + index, layout.parents[index])
                if metadata
                else b""
            ),
        )
        for index, ((body, metadata), tag, chosen) in enumerate(
            zip(built.bodies, built.tags, built.chosen_ids, strict=True)
        )
    ]
    return records, seal.seal_title(title) if title else ""


#: From this many messages on, an append sends its records packed (see :func:`record_arguments`):
#: the most that one argument each keeps within the cap, with its 3 + 12 keys + 4 fields and
#: room to spare. Not lower: cutting the records apart costs the script about 0.7 µs a message
#: (a 10,000-message append: 1.6x the Redis time of one argument each; bench/long_append.py).
PACKED_FROM = MAX_COMMAND_ARGUMENTS - 99


def record_arguments(records: list[bytes]) -> tuple[bytes | str, ...]:
    """The records as ``lua/append.lua`` takes them: one argument each, or, from
    :data:`PACKED_FROM` records on, three: an empty marker, their lengths (comma-separated) and
    their bytes end to end. One argument per record would take a 10,000-message append to
    10,019 arguments, over the 3,999 a managed service takes in one command; packed, any append
    sends 7 after its keys (and up to 12 keys)."""
    if len(records) < PACKED_FROM:
        return tuple(records)
    return (b"", ",".join([str(len(record)) for record in records]), b"".join(records))


_CONFLICT_POLICIES = get_args(ConflictPolicy)
_EXISTING_POLICIES = get_args(ExistingPolicy)


class AppendCall(NamedTuple):
    """``lua/append.lua``'s ARGV[1]: the call's fields, tab-joined into one argument. The field
    order is the wire order, which the script's header names (``call.<field>``) and a test
    compares with this tuple."""

    user: str
    inc: str
    branch: str
    expected: str
    on_conflict: str
    on_existing: str
    now: str
    request: str
    chat_id: str
    index_owner: str
    soft_tokens: str
    job_ttl: str
    keep: str
    base: str
    digest: str
    recall: str
    trace: str
    seal: str


class AppendReply(NamedTuple):
    """``lua/append.lua``'s reply, in its order (the header's ``reply.<field>`` lines)."""

    branch: bytes
    first: int
    edits: list[int]
    rebased: int
    conflict_fork: bytes
    created: list[bytes]
    updated_at: int
    owner: bytes
    indexed: int
    incarnation: bytes
    context_tokens: int
    job: bytes
    enqueued: int
    head_tokens: int
    resent: int


def _parse_append(
    raw: Sequence[Any], chosen_ids: Sequence[str], tags: Sequence[str]
) -> tuple[AppendResult, str, bool, bool, int]:
    """The result, from the first position the script used and the messages that were edits:
    a message keeps its chosen id unless it was an edit, else gets ``<pos>.<inc>.<tag>``."""
    reply = AppendReply(*raw)
    first, inc = int(reply.first), text(reply.incarnation)
    edited = {int(index) - 1 for index in reply.edits}
    stored = tuple(
        chosen if chosen and index not in edited else derived_id(first + index, inc, tags[index])
        for index, chosen in enumerate(chosen_ids)
    )
    result = AppendResult(
        branch=text(reply.branch),
        head_message_id=stored[-1],
        message_ids=stored,
        rebased=bool(reply.rebased),
        conflict_fork=text(reply.conflict_fork) or None,
        created_branches=tuple(text(name) for name in reply.created),
        updated_at=int(reply.updated_at),
        context_tokens=int(reply.context_tokens),
        compaction_job=text(reply.job) or None,
        incarnation=text(reply.incarnation) or None,
        resent=bool(reply.resent),
    )
    return (
        result,
        text(reply.owner),
        bool(reply.indexed),
        bool(reply.enqueued),
        int(reply.head_tokens),
    )
