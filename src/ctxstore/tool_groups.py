"""Tool groups in a chat message list: where one starts and ends, and where a list may be cut.

An assistant message that calls tools (``tool_calls``, or the legacy ``function_call``) and the
``tool`` / ``function`` results that answer it form one group. Providers reject a request whose
tool result has no call before it, so whatever drops the older part of a history (a compaction,
a window) must cut before a group or after it, never inside. These helpers are pure functions
over plain message lists (oldest first) so the ``ContextManager``, the engine and anything else
that trims a history agree on where a cut may fall.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ctxstore.errors import ValidationError

__all__ = [
    "TOOL_RESULT_ROLES",
    "calls_tools",
    "is_tool_result",
    "safe_cut_point",
    "tool_group_end",
    "tool_group_start",
    "tool_groups",
]

#: Roles of the messages that answer a tool call (``function`` is the legacy spelling).
TOOL_RESULT_ROLES = frozenset({"tool", "function"})


def is_tool_result(message: Mapping[str, Any]) -> bool:
    """Whether ``message`` answers a tool call (its role is ``tool`` or ``function``)."""
    return message.get("role") in TOOL_RESULT_ROLES


def calls_tools(message: Mapping[str, Any]) -> bool:
    """Whether ``message`` calls tools: a non-empty ``tool_calls`` list or a ``function_call``."""
    calls = message.get("tool_calls")
    if isinstance(calls, list) and calls:
        return True
    return isinstance(message.get("function_call"), Mapping)


def tool_group_start(messages: Sequence[Mapping[str, Any]], index: int) -> int:
    """The index where the group holding ``messages[index]`` starts: for a tool result, the
    message before its run of results (the call; or, for results without a call before them,
    the message they follow, so a cut there still keeps them after something); else ``index``.
    """
    _check_index(messages, index)
    start = index
    while start > 0 and is_tool_result(messages[start]):
        start -= 1
    return start


def tool_group_end(messages: Sequence[Mapping[str, Any]], index: int) -> int:
    """The index just past the group holding ``messages[index]``: past the run of tool results
    that follows a call or a result; ``index + 1`` for any other message."""
    _check_index(messages, index)
    end = index + 1
    if calls_tools(messages[index]) or is_tool_result(messages[index]):
        while end < len(messages) and is_tool_result(messages[end]):
            end += 1
    return end


def tool_groups(messages: Sequence[Mapping[str, Any]]) -> list[tuple[int, int]]:
    """The list as consecutive ``(start, end)`` spans that must stay together: a tool call with
    its results, or one message alone."""
    spans: list[tuple[int, int]] = []
    index = 0
    while index < len(messages):
        end = tool_group_end(messages, index)
        spans.append((index, end))
        index = end
    return spans


def safe_cut_point(messages: Sequence[Mapping[str, Any]], keep: int) -> int:
    """How many of ``messages`` (oldest first) may go so that at least the newest ``keep`` stay
    and the first one kept is not a tool result: the kept part grows backwards to take in the
    whole group (0: nothing can go)."""
    if isinstance(keep, bool) or not isinstance(keep, int) or keep < 0:
        raise ValidationError(f"keep must be a non-negative integer, got {keep!r}")
    cut = max(0, len(messages) - keep)
    if cut == len(messages):
        return cut  # nothing kept: no group to split
    return tool_group_start(messages, cut)


def _check_index(messages: Sequence[Mapping[str, Any]], index: int) -> None:
    if not 0 <= index < len(messages):
        raise ValidationError(f"index {index} is outside a list of {len(messages)} messages")
