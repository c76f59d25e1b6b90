"""``ContextManager``: the context-window policy, usable with or without a store.

It tracks the tokens an agent spends (``record_usage`` after each LLM step) and the size of the
context it is about to send, and says when to act: past ``soft_threshold`` a summary is due in
the background (``should_summarize``: the engine enqueues a compaction job), past
``hard_threshold`` the context must shrink before the next call (``should_compactify``: the
engine compacts inline). The response reserve counts against the window:
``usage_ratio = (estimated_context_size + response_reserve) / max_tokens``.

``compactify(messages)`` keeps the newest ``min_recent_messages`` verbatim (never cutting a tool
call from its results) and replaces everything older, the previous summary included, by one
assistant message marked as a context summary. ``prepare_messages`` moves that summary into the
system prompt, so no marker reaches a provider. The summary comes from ``compactify=`` (a
function ``messages -> str``, sync or async) or from litellm with ``summary_model`` (see
:mod:`ctxstore.summarizer`).
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from typing import Any, TypedDict

from ctxstore.compaction import SummarizeRequest, cut_point
from ctxstore.core.summaries import CONTEXT_SUMMARY
from ctxstore.errors import ConfigurationError, ValidationError
from ctxstore.model_info import model_info
from ctxstore.prompting import summary_section
from ctxstore.tokens import TokenCounter, count_tokens, message_counter
from ctxstore.usage import normalize_usage

__all__ = ["ContextManager", "ContextState", "is_context_summary"]

Compactify = Callable[[list[dict[str, Any]]], "str | Awaitable[str]"]


class ContextState(TypedDict):
    """What :meth:`ContextManager.get_state` reports."""

    total_input_tokens: int
    total_output_tokens: int
    estimated_context_size: int
    max_tokens: int
    usage_ratio: float
    soft_threshold_exceeded: bool
    hard_threshold_exceeded: bool
    summary_count: int


def is_context_summary(message: object) -> bool:
    """Whether ``message`` is a context summary (an assistant message whose ``metadata`` says
    ``{"type": "context-summary", ...}``)."""
    if not isinstance(message, Mapping):
        return False
    metadata = message.get("metadata")
    return isinstance(metadata, Mapping) and metadata.get("type") == CONTEXT_SUMMARY


class ContextManager:
    """The context-window policy of one conversation; see the module docstring."""

    def __init__(
        self,
        model: str | None = None,
        max_tokens: int | None = None,
        soft_threshold: float = 0.75,
        hard_threshold: float = 0.90,
        response_reserve: int = 4096,
        min_recent_messages: int = 4,
        summary_model: str | None = None,
        summary_prompt: str | None = None,
        compactify: Compactify | None = None,
        estimate_tokens: TokenCounter | None = None,
        *,
        summary_options: Mapping[str, Any] | None = None,
    ) -> None:
        """``summary_options`` go to every summary-model call (``api_key``, ``temperature``,
        litellm's ``mock_response``...)."""
        self.model = model
        self.max_tokens = _window(model, max_tokens)
        for name, value in (("soft_threshold", soft_threshold), ("hard_threshold", hard_threshold)):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ConfigurationError(f"{name} must be a number, got {value!r}")
        if not 0 < soft_threshold < hard_threshold <= 1:
            raise ConfigurationError(
                "thresholds must satisfy 0 < soft_threshold < hard_threshold <= 1, got "
                f"{soft_threshold} and {hard_threshold}"
            )
        for name, count in (
            ("response_reserve", response_reserve),
            ("min_recent_messages", min_recent_messages),
        ):
            if isinstance(count, bool) or not isinstance(count, int) or count < 0:
                raise ConfigurationError(f"{name} must be a non-negative integer, got {count!r}")
        if response_reserve >= self.max_tokens:
            raise ConfigurationError("response_reserve must be smaller than max_tokens")
        if compactify is not None and not callable(compactify):
            raise ConfigurationError(f"compactify must be a function, got {compactify!r}")
        self.soft_threshold = float(soft_threshold)
        self.hard_threshold = float(hard_threshold)
        self.response_reserve = response_reserve
        self.min_recent_messages = min_recent_messages
        self.summary_model = summary_model
        self.summary_prompt = summary_prompt
        self.compactify_function = compactify
        self.estimate_tokens = estimate_tokens
        self.summary_options = dict(summary_options or {})
        self.count_message = message_counter(model, estimate_tokens)
        self.reset()

    # --- thresholds in tokens (what a save and a resolve compare the stored size with) -------

    @property
    def soft_tokens(self) -> int:
        """The context size at which a summary is due (the reserve taken off)."""
        return max(0, int(self.soft_threshold * self.max_tokens) - self.response_reserve)

    @property
    def hard_tokens(self) -> int:
        """The context size at which the context must shrink before the next call."""
        return max(0, int(self.hard_threshold * self.max_tokens) - self.response_reserve)

    # --- accounting ---------------------------------------------------------------------------

    def reset(self) -> None:
        """Forget the usage recorded and the context size seen."""
        self.total_input_tokens = 0
        self.total_output_tokens = 0
        self.estimated_context_size = 0
        self.summary_count = 0

    def record_usage(self, usage: Mapping[str, Any] | object) -> None:
        """Add one LLM step's usage (litellm / OpenAI objects, snake_case dicts, the JS SDKs'
        camelCase dicts). The step's input plus output becomes the estimated context size:
        what the provider saw, and the reply that joins the history."""
        counters = normalize_usage(usage)
        step_input = counters.get("input_tokens", 0)
        step_output = counters.get("output_tokens", 0)
        self.total_input_tokens += step_input
        self.total_output_tokens += step_output
        if step_input or step_output:
            self.estimated_context_size = step_input + step_output

    def _observe(self, messages: Sequence[Mapping[str, Any]]) -> int:
        self.estimated_context_size = count_tokens(
            list(messages), self.model, estimate_tokens=self.estimate_tokens
        )
        return self.estimated_context_size

    def _ratio(self) -> float:
        return min(1.0, (self.estimated_context_size + self.response_reserve) / self.max_tokens)

    def get_state(self) -> ContextState:
        """Totals, the estimated context size and how it stands against the thresholds."""
        ratio = self._ratio()
        return {
            "total_input_tokens": self.total_input_tokens,
            "total_output_tokens": self.total_output_tokens,
            "estimated_context_size": self.estimated_context_size,
            "max_tokens": self.max_tokens,
            "usage_ratio": ratio,
            "soft_threshold_exceeded": ratio >= self.soft_threshold,
            "hard_threshold_exceeded": ratio >= self.hard_threshold,
            "summary_count": self.summary_count,
        }

    def get_message_metadata(self) -> dict[str, Any]:
        """Cumulative tokens and the usage ratio, to attach to a streamed response."""
        return {
            "total_input_tokens": self.total_input_tokens,
            "total_output_tokens": self.total_output_tokens,
            "total_tokens": self.total_input_tokens + self.total_output_tokens,
            "estimated_context_size": self.estimated_context_size,
            "max_tokens": self.max_tokens,
            "usage_ratio": self._ratio(),
        }

    def should_summarize(self, messages: Sequence[Mapping[str, Any]]) -> bool:
        """Past the soft threshold and not the hard one: a summary is due, in the background."""
        self._observe(messages)
        ratio = self._ratio()
        return self.soft_threshold <= ratio < self.hard_threshold

    def should_compactify(self, messages: Sequence[Mapping[str, Any]]) -> bool:
        """Past the hard threshold: compact before the next call."""
        self._observe(messages)
        return self._ratio() >= self.hard_threshold

    # --- compaction ---------------------------------------------------------------------------

    def compactify(self, messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """``messages`` with everything but the newest ``min_recent_messages`` (and leading
        system messages) replaced by one context summary; unchanged when nothing is old enough."""
        plan = self._compactify_plan(messages)
        try:
            request = next(plan)
            while True:
                request = plan.send(self.summarize(request.messages))
        except StopIteration as done:
            result: list[dict[str, Any]] = done.value
            return result

    async def acompactify(self, messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """The async form of :meth:`compactify`."""
        plan = self._compactify_plan(messages)
        try:
            request = next(plan)
            while True:
                request = plan.send(await self.asummarize(request.messages))
        except StopIteration as done:
            result: list[dict[str, Any]] = done.value
            return result

    def _compactify_plan(
        self, messages: Sequence[Mapping[str, Any]]
    ) -> Generator[SummarizeRequest, str, list[dict[str, Any]]]:
        items = [_plain(message, index) for index, message in enumerate(messages)]
        lead = 0
        while lead < len(items) and items[lead].get("role") == "system":
            lead += 1
        system, rest = items[:lead], items[lead:]
        previous = rest[0] if rest and is_context_summary(rest[0]) else None
        history = rest[1:] if previous is not None else rest
        cut = cut_point(history, self.min_recent_messages)
        if cut == 0:
            self._observe(items)
            return items
        replaced = ([previous] if previous is not None else []) + history[:cut]
        text = yield SummarizeRequest(replaced)
        if not isinstance(text, str) or not text.strip():
            raise ValidationError(f"the summarizer returned no text: {text!r}")
        covered = cut + (int(previous["metadata"].get("covered", 0)) if previous else 0)
        before = sum(self.count_message(message) for message in replaced)
        summary: dict[str, Any] = {"role": "assistant", "content": text.strip()}
        after = self.count_message(summary)
        summary["metadata"] = {
            "type": CONTEXT_SUMMARY,
            "covered": covered,
            "tokens_before": before,
            "tokens_after": after,
        }
        self.summary_count += 1
        result = [*system, summary, *history[cut:]]
        self._observe(result)
        return result

    def summarize(self, messages: list[dict[str, Any]]) -> str:
        """The summary text of ``messages``: ``compactify=`` (sync) or the summary model."""
        if self.compactify_function is not None:
            text = self.compactify_function(messages)
            if inspect.isawaitable(text):
                if inspect.iscoroutine(text):
                    text.close()
                raise ConfigurationError(
                    "compactify= is async: call acompactify() (or use the async engine)"
                )
            return str(text)
        return str(self._summarizer().summarize(messages))

    async def asummarize(self, messages: list[dict[str, Any]]) -> str:
        """The async form of :meth:`summarize` (a sync ``compactify=`` works too)."""
        if self.compactify_function is not None:
            text = self.compactify_function(messages)
            if inspect.isawaitable(text):
                text = await text
            return str(text)
        return str(await self._summarizer().asummarize(messages))

    def _summarizer(self) -> Any:
        if self.summary_model is None:
            raise ConfigurationError(
                "a summary is needed but this ContextManager has neither summary_model= "
                "(a litellm model name) nor compactify= (a function messages -> str)"
            )
        from ctxstore.summarizer import LiteLLMSummarizer

        return LiteLLMSummarizer(
            self.summary_model, prompt=self.summary_prompt, **self.summary_options
        )

    # --- sending ------------------------------------------------------------------------------

    def prepare_messages(
        self, messages: Sequence[Mapping[str, Any]], system_prompt: str | None = None
    ) -> list[dict[str, Any]]:
        """The list to send: one leading system message (``system_prompt``, the list's own
        leading system messages and the summary section), then the other messages, without the
        summary message and without any ``metadata`` (never sent to a model)."""
        items = [_plain(message, index) for index, message in enumerate(messages)]
        summaries = [item for item in items if is_context_summary(item)]
        rest = [item for item in items if not is_context_summary(item)]
        sections = [system_prompt] if system_prompt else []
        while rest and rest[0].get("role") == "system":
            content = rest.pop(0).get("content")
            if isinstance(content, str) and content:
                sections.append(content)
        if summaries:
            sections.append(summary_section(str(summaries[-1].get("content") or "")))
        prepared = [
            {key: value for key, value in item.items() if key != "metadata"} for item in rest
        ]
        if sections:
            prepared.insert(0, {"role": "system", "content": "\n\n".join(sections)})
        self._observe(prepared)
        return prepared


def _plain(message: Mapping[str, Any], index: int) -> dict[str, Any]:
    if not isinstance(message, Mapping):
        raise ValidationError(f"messages[{index}] is not a message dict: {message!r}")
    return copy.deepcopy(dict(message))


def _window(model: str | None, max_tokens: int | None) -> int:
    if max_tokens is not None:
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise ConfigurationError(f"max_tokens must be a positive integer, got {max_tokens!r}")
        return max_tokens
    if model is None:
        raise ConfigurationError("a ContextManager needs max_tokens= or a model= litellm knows")
    info = model_info(model)
    if info is None or info.max_input_tokens is None:
        raise ConfigurationError(
            f"the input window of model {model!r} is unknown to litellm's model map: "
            "pass max_tokens="
        )
    return info.max_input_tokens
