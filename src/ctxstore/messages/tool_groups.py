"""Tool groups in a chat message list: where one starts and ends, and where a list may be cut.

In chat messages, an assistant message that calls tools (``tool_calls``, or the legacy
``function_call``) and the ``tool`` / ``function`` results that answer it form one group.
Providers reject a request whose tool result has no call before it, so whatever drops the older
part of a history (a compaction, a window) must cut before a group or after it, never inside.

In the items of OpenAI's Responses API (and the OpenAI Agents SDK), a call is an item of its
own (``function_call``, ``custom_tool_call``, ``computer_call``, ``local_shell_call``, ...)
followed by its ``*_output`` items, and parallel calls come as ``[call1, call2, out1, out2]``.
Which call an output answers is not known without reading both, and a cut is decided from
one flag per message (the store keeps it beside each message, see
:mod:`ctxstore._core.format.tokens`), so every call item and every output item *continues* the
group of the item before it: a run of calls and outputs stays whole with the item that
precedes it (the user message, or the reasoning item a reasoning model needs before its
calls), and no cut separates an output from a call before it in the run.

These helpers are pure functions over plain message lists (oldest first) so the
``ContextManager``, the engine, the store's windows and anything else that trims a history
agree on where a cut may fall.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ctxstore.errors import ValidationError

__all__ = [
    "TOOL_RESULT_ROLES",
    "calls_tools",
    "continues_tool_group",
    "is_opaque_item",
    "is_tool_call_item",
    "is_tool_result",
    "safe_cut_point",
    "tool_group_end",
    "tool_group_start",
    "tool_groups",
]

#: Roles of the messages that answer a tool call (``function`` is the legacy spelling).
TOOL_RESULT_ROLES = frozenset({"tool", "function"})
#: Responses API item types that call or answer without the ``_call`` / ``_call_output``
#: suffix: an MCP approval request waits for its response.
_CALL_ITEM_TYPES = frozenset({"mcp_approval_request"})
_OUTPUT_ITEM_TYPES = frozenset({"mcp_approval_response"})


def _item_type(message: Mapping[str, Any]) -> str | None:
    """The ``type`` of a role-less item (None for a chat message, which has a role)."""
    if message.get("role") is not None:
        return None
    kind = message.get("type")
    return kind if isinstance(kind, str) else None


def is_tool_call_item(message: Mapping[str, Any]) -> bool:
    """Whether ``message`` is a role-less Responses API call item: a ``*_call`` type
    (``function_call``, ``custom_tool_call``, ``computer_call``, ``local_shell_call``,
    ``web_search_call``, ...) or an ``mcp_approval_request``."""
    kind = _item_type(message)
    return kind is not None and (kind.endswith("_call") or kind in _CALL_ITEM_TYPES)


def is_tool_result(message: Mapping[str, Any]) -> bool:
    """Whether ``message`` answers a tool call: a chat message whose role is ``tool`` or
    ``function``, or a role-less ``*_call_output`` item (or ``mcp_approval_response``)."""
    if message.get("role") in TOOL_RESULT_ROLES:
        return True
    kind = _item_type(message)
    return kind is not None and (kind.endswith("_call_output") or kind in _OUTPUT_ITEM_TYPES)


def is_opaque_item(message: Mapping[str, Any]) -> bool:
    """Whether ``message`` is an *opaque* item: neither a ``role`` nor a ``type`` (what a
    framework's session stores as given, such as the OpenAI Agents SDK's encrypted
    envelopes; only the adapters store them)."""
    return message.get("role") is None and "type" not in message


def continues_tool_group(message: Mapping[str, Any]) -> bool:
    """Whether ``message`` belongs to the group of the message before it, so that nothing may
    be cut right before it: a tool result, a Responses API call item, or an opaque item (it
    may wrap either: kept with the item before it, as they are)."""
    return is_tool_result(message) or is_tool_call_item(message) or is_opaque_item(message)


def calls_tools(message: Mapping[str, Any]) -> bool:
    """Whether ``message`` calls tools: a non-empty ``tool_calls`` list, a ``function_call``,
    or a Responses API call item."""
    calls = message.get("tool_calls")
    if isinstance(calls, list) and calls:
        return True
    return isinstance(message.get("function_call"), Mapping) or is_tool_call_item(message)


def tool_group_start(messages: Sequence[Mapping[str, Any]], index: int) -> int:
    """The index where the group holding ``messages[index]`` starts: for a message that
    continues a group (a tool result, a Responses call item), the message before its run of
    such messages (the call; for Responses items, the item before the first call; for results
    without a call before them, the message they follow, so a cut there still keeps them after
    something); else ``index``.
    """
    _check_index(messages, index)
    start = index
    while start > 0 and continues_tool_group(messages[start]):
        start -= 1
    return start


def tool_group_end(messages: Sequence[Mapping[str, Any]], index: int) -> int:
    """The index just past the group holding ``messages[index]``: past the run of messages
    that continue it (tool results, Responses call and output items) after ``index``;
    ``index + 1`` when the next message starts a group of its own."""
    _check_index(messages, index)
    end = index + 1
    while end < len(messages) and continues_tool_group(messages[end]):
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
    and the first one kept continues no group (a tool result, a Responses call item): the kept
    part grows backwards to take in the whole group (0: nothing can go)."""
    if isinstance(keep, bool) or not isinstance(keep, int) or keep < 0:
        raise ValidationError(f"keep must be a non-negative integer, got {keep!r}")
    cut = max(0, len(messages) - keep)
    if cut == len(messages):
        return cut  # nothing kept: no group to split
    return tool_group_start(messages, cut)


def _check_index(messages: Sequence[Mapping[str, Any]], index: int) -> None:
    if not 0 <= index < len(messages):
        raise ValidationError(f"index {index} is outside a list of {len(messages)} messages")
