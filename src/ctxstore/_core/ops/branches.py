"""Branch operations: fork (with atomic auto-naming), read, list, activate."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ctxstore._base.ids import check_name
from ctxstore._core import telemetry
from ctxstore._core.format.fields import corrupt, field_text, pairs
from ctxstore._core.format.pointers import branch_info
from ctxstore._core.ids import new_request_id
from ctxstore._core.keys import ChatKeys
from ctxstore._core.ops.chats import chat_context, keys_for, scope_args
from ctxstore._core.protocol import Call, Operation, script_call
from ctxstore._core.scripts import load_script
from ctxstore._core.state import StoreState

if TYPE_CHECKING:
    from ctxstore.models import BranchInfo


def _one_branch(chat: ChatKeys) -> Any:
    """Parser for the ``{name, record, active, incarnation}`` reply several scripts share (the
    name is the caller's or the chat's active branch)."""

    def parse(reply: Sequence[Any]) -> BranchInfo:
        name, raw, active, _inc = reply
        chat_key = chat.key("chat")
        info, _seq = branch_info(
            field_text(name, chat_key, "active_branch"),
            raw,
            active=field_text(active, chat_key, "active_branch"),
            key=chat.key("branch"),
        )
        return info

    return parse


def create_branch(
    state: StoreState,
    chat_id: str,
    at_message: str | None,
    *,
    base: str = "main",
    name: str | None = None,
    activate: bool = True,
    user_id: str | None = None,
    incarnation: str | None = None,
    expected: tuple[str, str | None] | None = None,
) -> Operation[BranchInfo]:
    """A branch starting at ``at_message`` (empty for None).

    Without ``name`` it is called ``<base>-v<k+1>``, k counting the branches named ``base`` or
    starting with ``<base>-v``; the name is chosen inside the script, so concurrent forks never
    collide. An explicit ``name`` that exists is a BranchExistsError. ``expected`` (branch,
    head id or None for an empty branch): create it only while that branch is active with that
    head, else a HeadConflictError and nothing is written (the adapters' pop).
    """
    chat = state.keyspace.chat(chat_id)
    if at_message is not None:
        check_name(at_message, "at_message")
    guard = ""
    if expected is not None:
        check_name(expected[0], "expected branch")
        if expected[1] is not None:
            check_name(expected[1], "expected head")
        guard = f"{expected[0]}\t{expected[1] or ''}"
    info: BranchInfo = yield _create_call(
        state,
        chat,
        at_message or "",
        "message",
        base=base,
        name=name,
        activate=activate,
        scope=scope_args(user_id, incarnation),
        guard=guard,
    )
    return info


def branch_from_checkpoint(
    state: StoreState,
    chat_id: str,
    checkpoint: str,
    *,
    base: str = "main",
    name: str | None = None,
    activate: bool = True,
    user_id: str | None = None,
    incarnation: str | None = None,
) -> Operation[BranchInfo]:
    """A branch starting at a checkpoint's message: restoring it, in one script."""
    chat = state.keyspace.chat(chat_id)
    check_name(checkpoint, "checkpoint name")
    info: BranchInfo = yield _create_call(
        state,
        chat,
        checkpoint,
        "checkpoint",
        base=base,
        name=name,
        activate=activate,
        scope=scope_args(user_id, incarnation),
    )
    return info


def _create_call(
    state: StoreState,
    chat: ChatKeys,
    at: str,
    at_kind: str,
    *,
    base: str,
    name: str | None,
    activate: bool,
    scope: tuple[str, str],
    guard: str = "",
) -> Call[BranchInfo]:
    check_name(base, "base")
    if name is not None:
        check_name(name, "branch name")
    script = load_script("create_branch")
    parse = _one_branch(chat)
    return script_call(
        script,
        keys_for(script, chat),
        (
            *scope,
            at,
            base,
            name or "",
            "1" if activate else "0",
            state.clock(),
            at_kind,
            new_request_id(),
            guard,
        ),
        parse=lambda reply: parse(telemetry.recalled(reply)),
        context=chat_context(chat.chat_id),
        writes=True,
    )


def get_branch(
    state: StoreState,
    chat_id: str,
    name: str | None = None,
    *,
    user_id: str | None = None,
    incarnation: str | None = None,
) -> Operation[BranchInfo]:
    """One branch; the active one for ``name=None``."""
    chat = state.keyspace.chat(chat_id)
    if name is not None:
        check_name(name, "branch")
    script = load_script("get_branch")
    info: BranchInfo = yield script_call(
        script,
        keys_for(script, chat),
        (*scope_args(user_id, incarnation), name or ""),
        parse=_one_branch(chat),
        context=chat_context(chat_id),
    )
    return info


def list_branches(
    state: StoreState,
    chat_id: str,
    *,
    user_id: str | None = None,
    incarnation: str | None = None,
) -> Operation[list[BranchInfo]]:
    """Every branch in creation order, each with the length of its chain."""
    chat = state.keyspace.chat(chat_id)
    script = load_script("list_branches")

    def parse(reply: Sequence[Any]) -> list[BranchInfo]:
        active = field_text(reply[0], chat.key("chat"), "active_branch")
        records = pairs(reply[1], chat.key("branch"))
        if active not in records:
            raise corrupt(chat.key("chat"), "active_branch", "names no branch of the chat")
        ordered = [
            branch_info(name, raw, active=active, key=chat.key("branch"))
            for name, raw in records.items()
        ]
        ordered.sort(key=lambda pair: pair[1])
        return [info for info, _seq in ordered]

    branches: list[BranchInfo] = yield script_call(
        script,
        keys_for(script, chat),
        scope_args(user_id, incarnation),
        parse=parse,
        context=chat_context(chat_id),
    )
    return branches


def set_active_branch(
    state: StoreState,
    chat_id: str,
    name: str,
    *,
    user_id: str | None = None,
    incarnation: str | None = None,
) -> Operation[BranchInfo]:
    """Make ``name`` the chat's one active branch."""
    chat = state.keyspace.chat(chat_id)
    check_name(name, "branch")
    script = load_script("set_active_branch")
    info: BranchInfo = yield script_call(
        script,
        keys_for(script, chat),
        (*scope_args(user_id, incarnation), name),
        parse=_one_branch(chat),
        context=chat_context(chat_id),
        writes=True,
    )
    return info
