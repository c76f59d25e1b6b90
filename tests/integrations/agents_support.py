"""A scripted model for the OpenAI Agents SDK: canned responses, no network, every input kept.

It implements the SDK's ``Model`` interface (a whole response, or the same as a stream of
events), so ``Runner.run``, ``Runner.run_sync`` and ``Runner.run_streamed`` drive a real agent
loop (tool calls executed by the SDK, items saved to the session by the SDK) against it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from agents import Agent, function_tool, set_tracing_disabled
from agents.items import ModelResponse, TResponseOutputItem, TResponseStreamEvent
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseFunctionToolCall,
    ResponseOutputItemDoneEvent,
    ResponseOutputMessage,
    ResponseOutputText,
)
from openai.types.responses.response_reasoning_item import ResponseReasoningItem, Summary

set_tracing_disabled(True)  # nothing is exported anywhere


class ScriptedModel(Model):
    """Answers each model call with the next list of output items given to it."""

    def __init__(self, *turns: list[TResponseOutputItem]) -> None:
        self.turns = list(turns)
        self.inputs: list[list[dict[str, Any]]] = []

    def then(self, *items: TResponseOutputItem) -> ScriptedModel:
        self.turns.append(list(items))
        return self

    def _next(self, input: Any) -> list[TResponseOutputItem]:
        self.inputs.append(
            [{"role": "user", "content": input}] if isinstance(input, str) else input
        )
        if not self.turns:
            raise AssertionError("the model was called more often than scripted")
        return self.turns.pop(0)

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        output = self._next(args[1] if len(args) > 1 else kwargs["input"])
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    async def stream_response(
        self, *args: Any, **kwargs: Any
    ) -> AsyncIterator[TResponseStreamEvent]:
        output = self._next(args[1] if len(args) > 1 else kwargs["input"])
        for index, item in enumerate(output):
            yield ResponseOutputItemDoneEvent(
                type="response.output_item.done",
                item=item,
                output_index=index,
                sequence_number=index,
            )
        response = Response(
            id="resp-1",
            created_at=0,
            model="scripted",
            object="response",
            output=output,
            tool_choice="auto",
            tools=[],
            parallel_tool_calls=True,
        )
        yield ResponseCompletedEvent(
            type="response.completed", response=response, sequence_number=len(output)
        )

    @property
    def last_input(self) -> list[dict[str, Any]]:
        return self.inputs[-1]


def say(text: str) -> ResponseOutputMessage:
    """An assistant message; "__fake_id__" is the id the SDK's own fakes (and converters) use."""
    return ResponseOutputMessage(
        id="__fake_id__",
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
    )


def call_weather(call_id: str, city: str) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(
        type="function_call",
        id="__fake_id__",
        call_id=call_id,
        name="weather",
        arguments=json.dumps({"city": city}),
    )


def think(text: str) -> ResponseReasoningItem:
    return ResponseReasoningItem(
        id="rs_1", type="reasoning", summary=[Summary(type="summary_text", text=text)]
    )


@function_tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def weather_agent(model: ScriptedModel) -> Agent[Any]:
    return Agent(name="forecaster", instructions="Answer briefly.", model=model, tools=[weather])


def text_of(item: dict[str, Any]) -> Any:
    """What an item says: a message's text, a call's arguments, an output."""
    content = item.get("content")
    if isinstance(content, list):
        return content[0]["text"]
    if content is not None:
        return content
    return item.get("arguments", item.get("output"))
