"""UI message lists the codec tests share: hand-written cases of every part kind, and a seeded
generator of random chats for the comparison with the AI SDK."""

from __future__ import annotations

import random
from typing import Any

PNG = "data:image/png;base64,iVBORw0KGgo="
PDF = "data:application/pdf;base64,JVBERi0xLjQ="


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def tool(name: str, call_id: str, state: str = "output-available", **fields: Any) -> dict[str, Any]:
    part: dict[str, Any] = {"type": f"tool-{name}", "toolCallId": call_id, "state": state}
    part.setdefault("input", {"q": call_id})
    part.update(fields)
    if state == "output-available" and "output" not in part:
        part["output"] = {"answer": call_id}
    if state == "output-error" and "errorText" not in part:
        part["errorText"] = f"{name} failed"
    return part


def user(message_id: str, *parts: dict[str, Any]) -> dict[str, Any]:
    return {"id": message_id, "role": "user", "parts": list(parts) or [text("hi")]}


def assistant(message_id: str, *parts: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"id": message_id, "role": "assistant", "parts": list(parts), **extra}


STEP = {"type": "step-start"}

#: name -> a UI chat; each converts the same way with ctxstore and with the SDK.
CASES: dict[str, list[dict[str, Any]]] = {
    "plain": [user("u1", text("Hello")), assistant("a1", STEP, text("Hi there"))],
    "system": [
        {"id": "s", "role": "system", "parts": [text("Be brief. "), text("Use French.")]},
        user("u1", text("Bonjour")),
    ],
    "two text parts": [user("u1", text("first"), text("second"))],
    "image and pdf": [
        user(
            "u1",
            {"type": "file", "mediaType": "image/png", "url": PNG},
            {"type": "file", "mediaType": "application/pdf", "url": PDF, "filename": "a.pdf"},
            text("what are these?"),
        )
    ],
    "metadata and data parts": [
        user("u1", text("hi"), {"type": "data-weather", "data": {"city": "Paris"}}),
        assistant(
            "a1",
            STEP,
            {"type": "data-progress", "id": "p", "data": 1},
            text("done"),
            metadata={"tokens": 12},
        ),
    ],
    "reasoning and sources": [
        user("u1"),
        assistant(
            "a1",
            STEP,
            {"type": "reasoning", "text": "let me think", "state": "done"},
            {"type": "source-url", "sourceId": "s1", "url": "https://example.com"},
            {"type": "source-document", "sourceId": "s2", "mediaType": "text/plain", "title": "t"},
            text("answer"),
        ),
    ],
    "one tool call, two steps": [
        user("u1", text("weather in Paris?")),
        assistant(
            "a1",
            STEP,
            tool("weather", "c1", input={"city": "Paris"}, output={"temp": 21, "unit": "C"}),
            STEP,
            text("It is 21 C."),
        ),
    ],
    "parallel calls": [
        user("u1"),
        assistant(
            "a1",
            STEP,
            text("Looking both up."),
            tool("weather", "c1"),
            tool("time", "c2", output="12:00"),
            STEP,
            text("Done."),
        ),
    ],
    "errors and denials": [
        user("u1"),
        assistant(
            "a1",
            STEP,
            tool("weather", "c1", "output-error"),
            tool(
                "delete",
                "c2",
                "output-denied",
                approval={"id": "ap", "approved": False, "reason": "not allowed"},
            ),
            tool("delete", "c3", "approval-responded", approval={"id": "ap2", "approved": False}),
        ),
    ],
    "dynamic tool": [
        user("u1"),
        assistant(
            "a1",
            STEP,
            {
                "type": "dynamic-tool",
                "toolName": "mcp_search",
                "toolCallId": "d1",
                "state": "output-available",
                "input": {"query": "ünïcode"},
                "output": ["a", 1, None, True],
            },
        ),
    ],
    "streaming input is not sent": [
        user("u1"),
        assistant(
            "a1",
            STEP,
            text("partial"),
            {"type": "tool-weather", "toolCallId": "c9", "state": "input-streaming"},
        ),
    ],
    "steering message": [
        user("u1"),
        assistant(
            "a1",
            STEP,
            text("Working"),
            {"type": "steering-message", "id": "st", "parts": [text("also check Rome")]},
            STEP,
            text("Rome too."),
        ),
    ],
    "multi-turn": [
        user("u1", text("one")),
        assistant("a1", STEP, text("1")),
        user("u2", text("two")),
        assistant("a2", STEP, tool("calc", "c1", input={"x": 2}, output=4), STEP, text("4")),
        user("u3", text("three")),
    ],
}


def random_chat(rng: random.Random, turns: int) -> list[dict[str, Any]]:
    """A random UI chat: user messages with texts and files, assistant answers of one to three
    steps with texts, reasoning, data and tool parts in every settled state."""
    chat: list[dict[str, Any]] = []
    calls = 0
    for turn in range(turns):
        parts = [text(f"question {turn} " + "x" * rng.randint(0, 30))]
        if rng.random() < 0.2:
            parts.insert(0, {"type": "file", "mediaType": "image/jpeg", "url": PNG})
        chat.append(user(f"u{turn}", *parts))
        answer: list[dict[str, Any]] = []
        for _step in range(rng.randint(1, 3)):
            answer.append(STEP)
            for _ in range(rng.randint(0, 3)):
                roll = rng.random()
                calls += 1
                if roll < 0.3:
                    answer.append(text(rng.choice(["ok", "sure, ", "ünï ", ""]) + str(calls)))
                elif roll < 0.4:
                    answer.append({"type": "reasoning", "text": f"thinking {calls}"})
                elif roll < 0.5:
                    answer.append({"type": "data-step", "data": {"n": calls}})
                elif roll < 0.7:
                    output: Any = rng.choice([{"v": calls}, f"text {calls}", [1, 2], 3.5, None])
                    answer.append(tool("lookup", f"c{calls}", output=output))
                elif roll < 0.8:
                    answer.append(tool("fail", f"c{calls}", "output-error"))
                elif roll < 0.9:
                    answer.append(
                        tool(
                            "ask",
                            f"c{calls}",
                            "output-denied",
                            approval={"id": f"ap{calls}", "approved": False},
                        )
                    )
                else:
                    answer.append(
                        {
                            "type": "dynamic-tool",
                            "toolName": "mcp",
                            "toolCallId": f"c{calls}",
                            "state": "output-available",
                            "input": {"n": calls},
                            "output": {"ok": True},
                        }
                    )
        chat.append(assistant(f"a{turn}", *answer))
    return chat
