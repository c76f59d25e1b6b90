"""A message's tool calls paired with their results, for the message panel.

A call and its result are separate messages: the assistant message that asks for tools
(chat-completions ``tool_calls``, or a Responses ``function_call`` item), then one result each
(a ``tool`` message with its ``tool_call_id``, or a ``function_call_output`` with its
``call_id``) among the messages after it on its chain. The panel of a call shows each result;
the panel of a result shows the call it answers. Both read a small window of the graph around
the message (one script) and the payloads of the few messages that can hold the other side (one
round trip), never the chat.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ctxstore._core.ops import reads
from ctxstore._core.ops.graph_window import graph_window
from ctxstore._core.protocol import Operation, together
from ctxstore._core.state import StoreState
from ctxstore.messages.text import preview

#: Messages after a call (or before a result) searched for the other side.
SEARCHED = 12


@dataclass(frozen=True)
class ToolCall:
    call_id: str
    name: str
    arguments: str
    result_id: str | None = None
    result: str | None = None


@dataclass(frozen=True)
class Answered:
    """What a result message answers: the call and the message that made it."""

    call_id: str
    name: str
    message_id: str


def calls_of(payload: dict[str, Any]) -> list[ToolCall]:
    """The tool calls a message makes, in either format."""
    found = []
    if payload.get("type") == "function_call":
        found.append(
            ToolCall(
                str(payload.get("call_id", "")),
                str(payload.get("name", "")),
                str(payload.get("arguments", "")),
            )
        )
    calls = payload.get("tool_calls")
    for call in calls if isinstance(calls, list) else []:
        if not isinstance(call, dict):
            continue
        function: dict[str, Any] = (
            call["function"] if isinstance(call.get("function"), dict) else {}
        )
        found.append(
            ToolCall(
                str(call.get("id", "")),
                str(function.get("name", "")),
                str(function.get("arguments", "")),
            )
        )
    return found


def result_id_of(payload: dict[str, Any]) -> str | None:
    """The call a result message answers, in either format (None: not a result)."""
    if payload.get("role") == "tool" and payload.get("tool_call_id") is not None:
        return str(payload["tool_call_id"])
    if payload.get("type") == "function_call_output" and payload.get("call_id") is not None:
        return str(payload["call_id"])
    return None


def paired(
    state: StoreState, chat_id: str, message_id: str, payload: dict[str, Any]
) -> Operation[tuple[list[ToolCall], Answered | None]]:
    """The message's calls with their results, and the call it answers when it is a result."""
    calls = calls_of(payload)
    answers = result_id_of(payload)
    if not calls and answers is None:
        return [], None
    window = yield from graph_window(state, chat_id, around=message_id, radius=SEARCHED)
    nodes = {node.id: node for node in window.nodes}
    me = nodes.get(message_id)
    if me is None:
        return calls, None
    if calls:
        later = _descendants(window.nodes, message_id)[:SEARCHED]
        found = yield from _payloads(state, chat_id, later)
        results = {result_id_of(p): (mid, p) for mid, p in found if result_id_of(p)}
        calls = [
            ToolCall(c.call_id, c.name, c.arguments, *(
                (results[c.call_id][0], preview(results[c.call_id][1]))
                if c.call_id in results else (None, None)
            ))
            for c in calls
        ]  # fmt: skip
    answered = None
    if answers is not None:
        earlier: list[str] = []
        node = me
        while node.parent_id is not None and len(earlier) < SEARCHED:
            earlier.append(node.parent_id)
            node = nodes[node.parent_id]
        for mid, ancestor in (yield from _payloads(state, chat_id, earlier)):
            match = next((c for c in calls_of(ancestor) if c.call_id == answers), None)
            if match is not None:
                answered = Answered(match.call_id, match.name, mid)
                break
    return calls, answered


def _descendants(nodes: Any, message_id: str) -> list[str]:
    """The drawn messages whose chain passes through ``message_id``, nearest first."""
    below = {message_id}
    found = []
    for node in sorted(nodes, key=lambda n: n.depth):
        if node.parent_id in below:
            below.add(node.id)
            found.append(node.id)
    return found


def _payloads(
    state: StoreState, chat_id: str, ids: list[str]
) -> Operation[list[tuple[str, dict[str, Any]]]]:
    if not ids:
        return []
    stored = yield from together([reads.get_message(state, chat_id, mid) for mid in ids])
    return [(mid, s["message"]) for mid, s in zip(ids, stored, strict=True) if isinstance(s, dict)]
