"""Message operations: append (with head compare-and-set), read one, read a chain."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, get_args

from ctxstore.core.chats import chat_context, keys_for, with_touch
from ctxstore.core.codec import encode, plain_dict
from ctxstore.core.ids import check_name, new_message_id
from ctxstore.core.protocol import Arg, Operation, script_call
from ctxstore.core.records import branch_info, chain_messages, message_record, stored_message, text
from ctxstore.core.scripts import load_script
from ctxstore.core.state import StoreState
from ctxstore.errors import ValidationError
from ctxstore.models import (
    AppendResult,
    BranchChain,
    ConflictPolicy,
    ExistingPolicy,
    MessageInput,
    NewMessage,
    StoredMessage,
)


def check_payload(payload: object, where: str) -> dict[str, Any]:
    """A chat-message dict: a mapping with string keys and a non-empty string ``role``."""
    if not isinstance(payload, Mapping):
        raise ValidationError(
            f"{where} must be a chat-message mapping, got {type(payload).__name__}"
        )
    role = payload.get("role")
    if not isinstance(role, str) or not role:
        raise ValidationError(f"{where} needs a non-empty string 'role', got {role!r}")
    for key in payload:
        if not isinstance(key, str):
            raise ValidationError(f"{where} has a non-string key {key!r}")
    return plain_dict(payload)


def check_policy(value: object, allowed: tuple[str, ...], what: str) -> str:
    if value not in allowed:
        raise ValidationError(f"{what} must be one of {allowed}, got {value!r}")
    return str(value)


def append_args(
    state: StoreState,
    messages: Iterable[MessageInput],
    *,
    on_existing: str,
    now: int,
) -> list[Arg]:
    """id, spare id, record triples; every message validated and encoded before anything is sent."""
    items = list(messages)
    if not items:
        raise ValidationError("append needs at least one message")
    if len(items) > state.limits.max_batch:
        raise ValidationError(
            f"append takes at most {state.limits.max_batch} messages at once, got {len(items)}"
        )
    args: list[Arg] = []
    seen: set[str] = set()
    for index, item in enumerate(items):
        where = f"messages[{index}]"
        if isinstance(item, NewMessage):
            payload: object = item.message
            message_id = new_message_id() if item.id is None else check_name(item.id, f"{where} id")
        else:
            payload, message_id = item, new_message_id()
        if message_id in seen:
            raise ValidationError(f"{where} repeats message id {message_id!r}")
        seen.add(message_id)
        checked = check_payload(payload, where)
        packed = encode(
            message_record(checked, now),
            what=where,
            limit=state.limits.max_message_bytes,
            payload=checked,
        )
        spare = new_message_id() if on_existing == "fork" else ""
        args += [message_id, spare, packed]
    return args


def append(
    state: StoreState,
    chat_id: str,
    branch: str,
    messages: Iterable[MessageInput],
    *,
    expected_head: str | None,
    on_conflict: ConflictPolicy = "raise",
    on_existing: ExistingPolicy = "raise",
) -> Operation[AppendResult]:
    """Append in order and move the head, in one script; see ``lua/append.lua`` for the policies."""
    chat = state.keyspace.chat(chat_id)
    check_name(branch, "branch")
    if expected_head is not None:
        check_name(expected_head, "expected_head")
    check_policy(on_conflict, get_args(ConflictPolicy), "on_conflict")
    check_policy(on_existing, get_args(ExistingPolicy), "on_existing")
    now = state.clock()
    args = append_args(state, messages, on_existing=on_existing, now=now)
    script = load_script("append")
    call = script_call(
        script,
        keys_for(script, chat),
        (branch, expected_head or "", on_conflict, on_existing, now, *args),
        parse=_parse_append,
        context=chat_context(chat_id),
    )
    result, _owner = yield from with_touch(
        state,
        chat_id,
        call,
        now,
        owner_of=lambda parsed: parsed[1],
        updated_at_of=lambda parsed: parsed[0].updated_at,
    )
    appended: AppendResult = result
    return appended


def _parse_append(reply: Sequence[Any]) -> tuple[AppendResult, str]:
    target, head, stored, rebased, conflict_fork, created, updated_at, owner = reply
    result = AppendResult(
        branch=text(target),
        head_message_id=text(head),
        message_ids=tuple(text(i) for i in stored),
        rebased=bool(rebased),
        conflict_fork=text(conflict_fork) or None,
        created_branches=tuple(text(b) for b in created),
        updated_at=int(updated_at),
    )
    return result, text(owner)


def get_message(state: StoreState, chat_id: str, message_id: str) -> Operation[StoredMessage]:
    chat = state.keyspace.chat(chat_id)
    check_name(message_id, "message_id")
    script = load_script("get_message")
    message: StoredMessage = yield script_call(
        script,
        keys_for(script, chat),
        (message_id,),
        parse=lambda reply: stored_message(
            message_id, text(reply[1]) or None, reply[0], chat.key("msg")
        ),
        context=chat_context(chat_id),
    )
    return message


def max_depth_arg(state: StoreState, max_depth: int | None) -> int:
    if max_depth is None:
        return state.limits.max_chain_depth
    if isinstance(max_depth, bool) or not isinstance(max_depth, int) or max_depth < 1:
        raise ValidationError(f"max_depth must be a positive integer, got {max_depth!r}")
    return max_depth


def get_chain(
    state: StoreState, chat_id: str, head: str | None, *, max_depth: int | None = None
) -> Operation[list[StoredMessage]]:
    """The chain ending at ``head``, root first (empty for ``head=None``), in one round trip."""
    chat = state.keyspace.chat(chat_id)
    if head is not None:
        check_name(head, "head")
    script = load_script("get_chain")
    chain: list[StoredMessage] = yield script_call(
        script,
        keys_for(script, chat),
        ("head", head or "", max_depth_arg(state, max_depth)),
        parse=lambda reply: chain_messages(chat.key("msg"), reply[3], reply[4]),
        context=chat_context(chat_id),
    )
    return chain


def load_branch(
    state: StoreState, chat_id: str, branch: str | None = None, *, max_depth: int | None = None
) -> Operation[BranchChain]:
    """A branch (the active one for None) and its whole chain, read in one script."""
    chat = state.keyspace.chat(chat_id)
    if branch is not None:
        check_name(branch, "branch")
    script = load_script("get_chain")

    def parse(reply: Sequence[Any]) -> BranchChain:
        name, raw_branch, active, ids, records = reply
        info, _seq = branch_info(
            text(name),
            raw_branch,
            active=text(active),
            length=len(ids),
            key=chat.key("branch"),
        )
        return BranchChain(info, chain_messages(chat.key("msg"), ids, records))

    loaded: BranchChain = yield script_call(
        script,
        keys_for(script, chat),
        ("branch", branch or "", max_depth_arg(state, max_depth)),
        parse=parse,
        context=chat_context(chat_id),
    )
    return loaded
