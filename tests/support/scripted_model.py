"""A model that answers from a script, through litellm's own entry points: each call of
``litellm.completion`` / ``acompletion`` (stream=True) streams the next answer of the script as
chat-completions chunks (dicts, the shape litellm's chunks have), text in small deltas, tool
calls with their arguments in pieces, then the usage. Every request is recorded."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Call:
    """A tool call in a scripted answer."""

    call_id: str
    name: str
    arguments: Any  # a dict (sent as JSON) or a raw string

    def text(self) -> str:
        return self.arguments if isinstance(self.arguments, str) else json.dumps(self.arguments)


@dataclass(frozen=True)
class Reasoning:
    text: str


#: One answer: texts, reasoning and tool calls, in order.
Answer = list[str | Call | Reasoning]


class ScriptedModel:
    def __init__(self, *answers: Answer, delay: float = 0.0, piece: int = 4) -> None:
        self.answers = list(answers)
        self.requests: list[dict[str, Any]] = []
        self.delay = delay
        self.piece = piece
        self.fail_at: int | None = None  # fail after this many chunks of the next answer
        self.on_chunk: Any = None  # called with the chunk index before each chunk
        #: What a title request (a call without stream=True) gets, or raises.
        self.title: str | BaseException = "Scripted Chat Title"
        self.title_requests: list[dict[str, Any]] = []

    def install(self, monkeypatch: Any) -> ScriptedModel:
        import litellm

        monkeypatch.setattr(litellm, "completion", self.completion)
        monkeypatch.setattr(litellm, "acompletion", self.acompletion)
        return self

    def completion(self, **request: Any) -> Any:
        if not request.get("stream"):
            return self._title_reply(request)
        self.requests.append(request)
        chunks = self._chunks()
        return self._sync(chunks)

    async def acompletion(self, **request: Any) -> Any:
        if not request.get("stream"):
            return self._title_reply(request)
        self.requests.append(request)
        return self._async(self._chunks())

    def _title_reply(self, request: dict[str, Any]) -> dict[str, Any]:
        """A call without ``stream``: a title request, answered with :attr:`title`."""
        self.title_requests.append(request)
        if isinstance(self.title, BaseException):
            raise self.title
        return {"choices": [{"message": {"role": "assistant", "content": self.title}}]}

    def _sync(self, chunks: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        for index, chunk in enumerate(chunks):
            if self.delay:
                time.sleep(self.delay)
            self._before(index)
            yield chunk

    async def _async(self, chunks: list[dict[str, Any]]) -> AsyncIterator[dict[str, Any]]:
        for index, chunk in enumerate(chunks):
            if self.delay:
                await asyncio.sleep(self.delay)
            self._before(index)
            yield chunk

    def _before(self, index: int) -> None:
        if self.on_chunk is not None:
            self.on_chunk(index)
        if self.fail_at is not None and index >= self.fail_at:
            raise RuntimeError(f"the model failed after {index} chunks")

    def _chunks(self) -> list[dict[str, Any]]:
        if not self.answers:
            raise AssertionError("the scripted model has no answer left")
        answer = self.answers.pop(0)
        chunks: list[dict[str, Any]] = []
        calls = 0
        output = 0
        for item in answer:
            if isinstance(item, str):
                for start in range(0, len(item), self.piece):
                    chunks.append(_delta({"content": item[start : start + self.piece]}))
                output += len(item.split())
            elif isinstance(item, Reasoning):
                chunks.append(_delta({"reasoning_content": item.text}))
            else:
                text = item.text()
                first = {
                    "index": calls,
                    "id": item.call_id,
                    "type": "function",
                    "function": {"name": item.name, "arguments": ""},
                }
                chunks.append(_delta({"tool_calls": [first]}))
                for start in range(0, len(text), 5):
                    fragment = {"index": calls, "function": {"arguments": text[start : start + 5]}}
                    chunks.append(_delta({"tool_calls": [fragment]}))
                calls += 1
        reason = "tool_calls" if calls else "stop"
        chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]})
        chunks.append(
            {
                "choices": [],
                "usage": {
                    "prompt_tokens": 10,
                    "completion_tokens": output + 1,
                    "total_tokens": 11 + output,
                },
            }
        )
        return chunks


def _delta(delta: dict[str, Any]) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
