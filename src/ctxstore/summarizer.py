"""The default summarizer: a litellm model writes the summary, and its input is bounded.

A compaction hands over the messages to summarize (the previous summary first). They are laid
out as a transcript; when transcript, prompt and the reply's allowance fit the summary model's
input window, one call summarizes them. When they do not, the transcript is cut into chunks that
each fit, each chunk is summarized, and the partial summaries are merged the same way
(recursively, if even they do not fit together). A summarizer therefore never sends more than
its model takes: the failure peers hit when the history to compact is itself longer than the
model that compacts it.

The plan (:func:`summary_plan`) is one generator of model requests, driven by
:meth:`LiteLLMSummarizer.summarize` (sync, ``litellm.completion``) and
:meth:`LiteLLMSummarizer.asummarize` (async, ``litellm.acompletion``).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ctxstore.core.preview import message_text
from ctxstore.errors import ConfigurationError, CtxStoreError
from ctxstore.llm import import_litellm, reply_text
from ctxstore.model_info import model_info
from ctxstore.tokens import count_tokens

DEFAULT_SUMMARY_PROMPT = (
    "You compress the earlier part of a conversation between a user and an AI assistant so the "
    "assistant can continue it without the original messages. Write a concise summary that "
    "keeps: decisions made and their reasons; facts, names, numbers and identifiers; the "
    "user's goals, preferences and constraints; open tasks and questions; and tool results "
    "that still matter (with their key values). Drop greetings, repetition and anything "
    "superseded. If the transcript starts with an earlier summary, fold it in. Write in the "
    "language of the conversation, as plain prose or short bullet points, and never invent "
    "anything."
)
MERGE_PROMPT = (
    "The texts below summarize consecutive parts of one conversation, oldest first. Merge them "
    "into one concise summary that keeps every decision, fact, preference, open task and "
    "relevant tool result, drops repetition, and lets later parts override earlier ones."
)
#: Tokens kept free for the summary itself (the reply) unless the caller says otherwise.
DEFAULT_SUMMARY_TOKENS = 1024


class SummarizerError(CtxStoreError):
    """The summary model returned no text."""


@dataclass(frozen=True)
class ModelRequest:
    """One call of the summary model: its messages."""

    messages: list[dict[str, str]]


def transcript_lines(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """The messages as transcript lines ``role: text``, tool calls and results included."""
    lines = []
    for message in messages:
        role = str(message.get("role", "unknown"))
        metadata = message.get("metadata")
        if isinstance(metadata, Mapping) and metadata.get("type") == "context-summary":
            role = "earlier summary"
        text = message_text(message)
        calls = message.get("tool_calls")
        if isinstance(calls, list):
            for call in calls:
                function = call.get("function", {}) if isinstance(call, Mapping) else {}
                if isinstance(function, Mapping):
                    text += f" [calls {function.get('name')}({function.get('arguments', '')})]"
        if not text and message.get("content") is not None:
            text = json.dumps(message.get("content"), default=str)
        lines.append(f"{role}: {text.strip()}")
    return lines


def summary_plan(
    messages: Sequence[Mapping[str, Any]],
    *,
    prompt: str,
    input_budget: int,
    count: Callable[[str], int],
) -> Generator[ModelRequest, str, str]:
    """Requests that summarize ``messages`` with no request over ``input_budget`` tokens (the
    prompt included); receives each reply, returns the summary."""
    if count(prompt) >= input_budget // 2:
        raise ConfigurationError("the summary prompt takes half the summary model's input window")
    texts = transcript_lines(messages)
    current_prompt = prompt
    while True:
        chunks = _chunks(texts, input_budget - count(current_prompt), count)
        partials = []
        for chunk in chunks:
            reply = yield ModelRequest(
                [
                    {"role": "system", "content": current_prompt},
                    {"role": "user", "content": "\n".join(chunk)},
                ]
            )
            if not isinstance(reply, str) or not reply.strip():
                raise SummarizerError("the summary model returned no text")
            partials.append(reply.strip())
        if len(partials) == 1:
            return partials[0]
        texts, current_prompt = partials, MERGE_PROMPT


def _chunks(lines: Sequence[str], budget: int, count: Callable[[str], int]) -> list[list[str]]:
    """Consecutive lines in groups of at most ``budget`` tokens; a longer line is cut."""
    chunks: list[list[str]] = [[]]
    used = 0
    for whole in lines:
        line, tokens = whole, count(whole) + 1
        while tokens > budget and len(line) > 1:  # one message longer than a whole request
            line = line[: len(line) // 2]
            tokens = count(line) + 1
        if used + tokens > budget and chunks[-1]:
            chunks.append([])
            used = 0
        chunks[-1].append(line)
        used += tokens
    return chunks


class LiteLLMSummarizer:
    """Summaries by any litellm model. ``max_input_tokens`` defaults to the model's window in
    litellm's bundled map; ``completion`` / ``acompletion`` replace litellm's (tests), and
    ``options`` go to every call (``api_key``, ``temperature``, litellm's ``mock_response``)."""

    def __init__(
        self,
        model: str,
        *,
        prompt: str | None = None,
        max_input_tokens: int | None = None,
        summary_tokens: int = DEFAULT_SUMMARY_TOKENS,
        completion: Callable[..., Any] | None = None,
        acompletion: Callable[..., Awaitable[Any]] | None = None,
        **options: Any,
    ) -> None:
        if not isinstance(model, str) or not model:
            raise ConfigurationError(f"summary_model must be a litellm model name, got {model!r}")
        if max_input_tokens is None:
            info = model_info(model)
            max_input_tokens = info.max_input_tokens if info is not None else None
        if max_input_tokens is None:
            raise ConfigurationError(
                f"the input window of summary model {model!r} is unknown to litellm's model map: "
                "pass max_input_tokens"
            )
        if summary_tokens < 1 or max_input_tokens <= summary_tokens:
            raise ConfigurationError("summary_tokens must be positive and below the window")
        self.model = model
        self.prompt = prompt or DEFAULT_SUMMARY_PROMPT
        self.input_budget = max_input_tokens - summary_tokens
        self.summary_tokens = summary_tokens
        self._completion = completion
        self._acompletion = acompletion
        self.options = options

    def _plan(self, messages: Sequence[Mapping[str, Any]]) -> Generator[ModelRequest, str, str]:
        return summary_plan(
            messages,
            prompt=self.prompt,
            input_budget=self.input_budget,
            count=lambda text: count_tokens(text, self.model),
        )

    def _kwargs(self, request: ModelRequest) -> dict[str, Any]:
        return {
            "model": self.model,
            "messages": request.messages,
            "max_tokens": self.summary_tokens,
            **self.options,
        }

    def summarize(self, messages: Sequence[Mapping[str, Any]]) -> str:
        """The summary of ``messages``, through ``litellm.completion``."""
        call = self._completion or import_litellm().completion
        plan = self._plan(messages)
        request = next(plan)
        while True:
            try:
                request = plan.send(_text(call(**self._kwargs(request))))
            except StopIteration as done:
                return str(done.value)

    async def asummarize(self, messages: Sequence[Mapping[str, Any]]) -> str:
        """The summary of ``messages``, through ``litellm.acompletion``."""
        call = self._acompletion or import_litellm().acompletion
        plan = self._plan(messages)
        request = next(plan)
        while True:
            try:
                request = plan.send(_text(await call(**self._kwargs(request))))
            except StopIteration as done:
                return str(done.value)


def _text(response: Any) -> str:
    try:
        return reply_text(response)
    except (TypeError, KeyError, IndexError, AttributeError) as error:
        raise SummarizerError(f"the summary model's reply holds no text ({error})") from error


def litellm_summarizer(model: str, **options: Any) -> Callable[[list[dict[str, Any]]], Any]:
    """The async summarize function a worker calls for ``--summary-model``."""
    return LiteLLMSummarizer(model, **options).asummarize
