"""``ContextManager``: the context-window policy, usable with or without a store.

It tracks the tokens an agent spends (``record_usage`` after each LLM step) and the size of the
context it is about to send, and says when to act: past ``soft_threshold`` a summary is due in
the background (``should_summarize``: the engine enqueues a compaction job), past
``hard_threshold`` the context must shrink before the next call (``should_compactify``: the
engine compacts inline). The response reserve counts against the window:
``usage_ratio = (estimated_context_size + response_reserve) / max_tokens``, capped at 1.

``compactify(messages)`` keeps the newest ``min_recent_messages`` verbatim (never cutting a tool
call from its results, :mod:`ctxstore.messages.tool_groups`) and replaces everything older,
the previous summary included, by one assistant message marked as a context summary.
``prepare_messages`` moves that summary into the system prompt, so no marker reaches a provider.
The summary comes from ``compactify=`` (a function ``messages -> str``, sync or async) or from
litellm with
``summary_model`` (:mod:`ctxstore.window.summarizer`, which bounds the summary model's input).

Importing this module loads neither litellm, tiktoken nor the store (redis): a process that only
wants the policy pays for none of them.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import logging
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal, TypedDict

from ctxstore._base.plans import Effect, Plan, aperformer, arun_plan, performer, run_plan
from ctxstore.errors import ConfigurationError, ValidationError
from ctxstore.messages.summaries import is_context_summary, summary_section
from ctxstore.messages.text import message_text
from ctxstore.messages.tokens import TokenCounter, count_tokens, message_counter
from ctxstore.messages.tool_groups import safe_cut_point
from ctxstore.messages.usage import normalize_usage
from ctxstore.ui.to_model import model_messages_of
from ctxstore.window.summarizer import (
    CONTEXT_SUMMARY,
    DEFAULT_SUMMARY_TOKENS,
    LiteLLMSummarizer,
    SummarizeRequest,
    asummarizing,
    input_window,
    summarizing,
)

__all__ = [
    "CONTEXT_SUMMARY",
    "DEFAULT_MAX_TOKENS",
    "Compactify",
    "ContextManager",
    "ContextState",
    "WindowSource",
    "is_context_summary",
    "summary_section",
]

log = logging.getLogger(__name__)

#: A caller's summarizer: the messages to summarize -> the summary text (or an awaitable of it).
Compactify = Callable[[list[dict[str, Any]]], "str | Awaitable[str]"]


#: The window of a manager given neither ``max_tokens`` nor a model litellm knows (the seed's).
DEFAULT_MAX_TOKENS = 128_000
#: Where a manager's window came from.
WindowSource = Literal["max_tokens", "model", "default"]


class ContextState(TypedDict):
    """What :meth:`ContextManager.get_state` reports (a plain, JSON-serializable dict)."""

    total_input_tokens: int
    total_output_tokens: int
    estimated_context_size: int
    max_tokens: int
    #: Where ``max_tokens`` came from: ``"max_tokens"`` (given), ``"model"`` (litellm's map of
    #: the model's input window) or ``"default"`` (neither: 128,000 tokens).
    max_tokens_source: WindowSource
    usage_ratio: float
    soft_threshold_exceeded: bool
    hard_threshold_exceeded: bool
    summary_count: int


class ContextManager:
    """The context-window policy of one conversation; see the module docstring.

    ``estimated_context_size`` is the size of the context the next call would send, from the
    newest of two sources: the token count of the last message list the manager was shown
    (``should_summarize``, ``should_compactify``, ``compactify`` / ``acompactify`` (their
    result), ``prepare_messages`` (what it returns)), or the last ``record_usage``'s input plus
    output (what the provider saw, plus the reply that joins the history). Counts use ``model``'s
    tokenizer, or ``estimate_tokens`` when given.

    Keyword-only extras: ``summary_max_tokens`` is the summary model's input window (default:
    litellm's map); ``summary_tokens`` the reply allowance of each summary call;
    ``summary_options`` go to every summary-model call (``api_key``, ``temperature``, litellm's
    ``mock_response``...); ``completion`` / ``acompletion`` replace ``litellm.completion`` /
    ``litellm.acompletion`` for the summary model (tests, custom clients).
    """

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
        summary_max_tokens: int | None = None,
        summary_tokens: int = DEFAULT_SUMMARY_TOKENS,
        summary_options: Mapping[str, Any] | None = None,
        completion: Callable[..., Any] | None = None,
        acompletion: Callable[..., Awaitable[Any]] | None = None,
    ) -> None:
        if model is not None and (not isinstance(model, str) or not model):
            raise ConfigurationError(f"model must be a model name or None, got {model!r}")
        self.model = model
        self.max_tokens, self.max_tokens_source = _window(model, max_tokens)
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
            raise ConfigurationError(
                f"response_reserve ({response_reserve}) must be smaller than max_tokens "
                f"({self.max_tokens})"
            )
        if compactify is not None and not callable(compactify):
            raise ConfigurationError(f"compactify must be a function, got {compactify!r}")
        if summary_model is not None and (not isinstance(summary_model, str) or not summary_model):
            raise ConfigurationError(
                f"summary_model must be a litellm model name, got {summary_model!r}"
            )
        if summary_options is not None and not isinstance(summary_options, Mapping):
            raise ConfigurationError(f"summary_options must be a mapping, got {summary_options!r}")
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
        # The litellm summarizer, checked now (an unknown summary model fails here, not at the
        # first compaction hours later) unless compactify= makes it unused.
        self._litellm: LiteLLMSummarizer | None = None
        if summary_model is not None and compactify is None:
            self._litellm = LiteLLMSummarizer(
                summary_model,
                prompt=summary_prompt,
                max_input_tokens=summary_max_tokens,
                summary_tokens=summary_tokens,
                completion=completion,
                acompletion=acompletion,
                **self.summary_options,
            )
        elif summary_prompt is not None and (
            not isinstance(summary_prompt, str) or not summary_prompt.strip()
        ):
            raise ConfigurationError(
                f"summary_prompt must be a non-empty text, got {summary_prompt!r}"
            )
        self.reset()

    # --- thresholds in tokens (what a save and a resolve compare the stored size with) -------

    @property
    def soft_tokens(self) -> int:
        """The smallest context size at which a summary is due (the reserve taken off)."""
        return self._threshold_tokens(self.soft_threshold)

    @property
    def hard_tokens(self) -> int:
        """The smallest context size at which the context must shrink before the next call."""
        return self._threshold_tokens(self.hard_threshold)

    def _threshold_tokens(self, threshold: float) -> int:
        # Rounded before the ceiling so 0.57 * 100 is 57, not 56.99...: the tokens and the
        # ratio then agree on every size.
        return max(0, math.ceil(round(threshold * self.max_tokens, 6)) - self.response_reserve)

    # --- accounting ---------------------------------------------------------------------------

    def reset(self) -> None:
        """Forget the usage recorded, the context size seen and the summaries made."""
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

    def _observe(self, messages: Sequence[Mapping[str, Any]] | None) -> None:
        if messages is not None:
            self.estimated_context_size = count_tokens(
                list(messages), self.model, estimate_tokens=self.estimate_tokens
            )

    def _ratio(self) -> float:
        return min(1.0, (self.estimated_context_size + self.response_reserve) / self.max_tokens)

    def get_state(self) -> ContextState:
        """Totals, the estimated context size (see the class docstring for where it comes from)
        and how it stands against the thresholds."""
        size = self.estimated_context_size
        return {
            "total_input_tokens": self.total_input_tokens,
            "total_output_tokens": self.total_output_tokens,
            "estimated_context_size": size,
            "max_tokens": self.max_tokens,
            "max_tokens_source": self.max_tokens_source,
            "usage_ratio": self._ratio(),
            "soft_threshold_exceeded": size >= self.soft_tokens,
            "hard_threshold_exceeded": size >= self.hard_tokens,
            "summary_count": self.summary_count,
        }

    def get_message_metadata(self) -> dict[str, Any]:
        """Cumulative tokens and the usage ratio: a JSON-serializable dict to attach to a
        streamed response (so a client can show how full the window is)."""
        return {
            "total_input_tokens": self.total_input_tokens,
            "total_output_tokens": self.total_output_tokens,
            "total_tokens": self.total_input_tokens + self.total_output_tokens,
            "estimated_context_size": self.estimated_context_size,
            "max_tokens": self.max_tokens,
            "usage_ratio": self._ratio(),
            "summary_count": self.summary_count,
        }

    def should_summarize(self, messages: Sequence[Mapping[str, Any]] | None = None) -> bool:
        """Past the soft threshold and not the hard one: a summary is due, in the background.
        ``messages`` (counted now) is what the next call would send; None judges the estimate
        as it stands (after ``record_usage``)."""
        self._observe(messages)
        return self.soft_tokens <= self.estimated_context_size < self.hard_tokens

    def should_compactify(self, messages: Sequence[Mapping[str, Any]] | None = None) -> bool:
        """Past the hard threshold: compact before the next call (``messages`` as for
        :meth:`should_summarize`)."""
        self._observe(messages)
        return self.estimated_context_size >= self.hard_tokens

    # --- compaction ---------------------------------------------------------------------------

    def compactify(self, messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """``messages`` with everything but the newest ``min_recent_messages`` (and leading
        system messages) replaced by one context summary; unchanged (a copy) when nothing is
        old enough, without calling the summarizer. Needs a sync summarizer."""
        handle = summarizing(self.summarize)
        return run_plan(self._compactify_plan(messages), performer(handle=handle))

    async def acompactify(self, messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """The async form of :meth:`compactify` (any summarizer)."""
        handle = asummarizing(self.asummarize)
        return await arun_plan(self._compactify_plan(messages), aperformer(handle=handle))

    def _compactify_plan(self, messages: Sequence[Mapping[str, Any]]) -> Plan[list[dict[str, Any]]]:
        """The compaction, once, as a plan: one :class:`SummarizeRequest` effect (the messages
        to summarize), answered with the summary text; returns the new list.
        :meth:`compactify` and :meth:`acompactify` only drive it."""
        items = [_plain(message, index) for index, message in enumerate(messages)]
        lead = 0
        while lead < len(items) and items[lead].get("role") == "system":
            lead += 1
        system, rest = items[:lead], items[lead:]
        previous = rest[0] if rest and is_context_summary(rest[0]) else None
        history = rest[1:] if previous is not None else rest
        cut = safe_cut_point(history, self.min_recent_messages)
        if cut == 0:
            self._observe(items)
            return items
        earlier = _covered(previous) if previous is not None else 0
        replaced = ([previous] if previous is not None else []) + history[:cut]
        # A copy: the summarizer may not alter what we keep.
        text = yield Effect(SummarizeRequest(copy.deepcopy(replaced)))
        if not isinstance(text, str) or not text.strip():
            raise ValidationError(f"the summarizer returned no text: {text!r}")
        summary: dict[str, Any] = {"role": "assistant", "content": text.strip()}
        summary["metadata"] = {
            "type": CONTEXT_SUMMARY,
            "covered": earlier + cut,
            "tokens_before": sum(self.count_message(message) for message in replaced),
            "tokens_after": self.count_message(summary),
        }
        self.summary_count += 1
        result = [*system, summary, *history[cut:]]
        self._observe(result)
        return result

    def summarize(self, messages: list[dict[str, Any]]) -> str:
        """The summary text of ``messages``: ``compactify=`` (a sync one) or the summary model
        through ``litellm.completion``. The engine calls this for its inline compactions."""
        function = self.compactify_function
        if function is not None:
            if _is_async_function(function):
                raise ConfigurationError(
                    "compactify= is an async function: call acompactify() (or use the async engine)"
                )
            text = function(messages)
            if inspect.isawaitable(text):
                if inspect.iscoroutine(text):
                    text.close()  # never awaited: close it rather than leak a warning
                raise ConfigurationError(
                    "compactify= returned an awaitable: call acompactify() (or use the async "
                    "engine)"
                )
            return _summary_text(text)
        return self._summarizer().summarize(messages)

    async def asummarize(self, messages: list[dict[str, Any]]) -> str:
        """The async form of :meth:`summarize`. A sync ``compactify=`` runs in a thread, so the
        event loop (a worker's other jobs, its signals) is served meanwhile."""
        function = self.compactify_function
        if function is not None:
            if _is_async_function(function):
                text: object = await function(messages)  # type: ignore[misc]
            else:
                text = await asyncio.to_thread(function, messages)
                if inspect.isawaitable(text):
                    text = await text
            return _summary_text(text)
        return await self._summarizer().asummarize(messages)

    def _summarizer(self) -> LiteLLMSummarizer:
        if self._litellm is None:
            raise ConfigurationError(
                "a summary is needed but this ContextManager has neither summary_model= "
                "(a litellm model name) nor compactify= (a function messages -> str)"
            )
        return self._litellm

    # --- sending ------------------------------------------------------------------------------

    def prepare_messages(
        self, messages: Sequence[Mapping[str, Any]], system_prompt: str | None = None
    ) -> list[dict[str, Any]]:
        """The list to send: one leading system message (``system_prompt``, the list's own
        leading system messages and the newest summary's section, in that order), then the
        messages after the newest summary, without any ``metadata`` (never sent to a model).
        What a summary covers is gone: everything between the leading system messages and
        the newest summary is dropped, as the seed does, so the context shrinks. UI messages
        are sent as the model messages they become. With neither a system prompt nor a summary
        there is no added system message."""
        if system_prompt is not None and not isinstance(system_prompt, str):
            raise ValidationError(f"system_prompt must be a text or None, got {system_prompt!r}")
        items = [_plain(message, index) for index, message in enumerate(messages)]
        sections = [system_prompt] if system_prompt else []
        start = 0
        while start < len(items) and _instructions(items[start]):
            text = message_text(items[start])
            if text:
                sections.append(text)
            start += 1
        newest = max(
            (index for index, item in enumerate(items) if is_context_summary(item)), default=-1
        )
        if newest >= 0:
            sections.append(summary_section(message_text(items[newest])))
            start = newest + 1
        prepared = [
            {key: value for key, value in sent.items() if key != "metadata"}
            for item in items[start:]
            for sent in model_messages_of(item)
        ]
        if sections:
            prepared.insert(0, {"role": "system", "content": "\n\n".join(sections)})
        self._observe(prepared)
        return prepared


def _instructions(message: Mapping[str, Any]) -> bool:
    """A leading system message: instructions, folded into the system message, never dropped."""
    return message.get("role") == "system" and not is_context_summary(message)


def _plain(message: Mapping[str, Any], index: int) -> dict[str, Any]:
    if not isinstance(message, Mapping):
        raise ValidationError(f"messages[{index}] is not a message dict: {message!r}")
    return copy.deepcopy(dict(message))


def _covered(summary: Mapping[str, Any]) -> int:
    """How many original messages a previous summary covers (0 when it does not say)."""
    covered = summary["metadata"].get("covered", 0)
    if isinstance(covered, bool) or not isinstance(covered, int) or covered < 0:
        raise ValidationError(
            f"the context summary's metadata covered must be a non-negative int, got {covered!r}"
        )
    return covered


def _is_async_function(function: Callable[..., Any]) -> bool:
    """An ``async def`` function, or an object whose class's ``__call__`` is one."""
    return inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(
        type(function).__call__
    )


def _summary_text(text: object) -> str:
    if not isinstance(text, str) or not text.strip():
        raise ValidationError(f"compactify= must return the summary text, returned {text!r}")
    return text


def _window(model: str | None, max_tokens: int | None) -> tuple[int, WindowSource]:
    """The window and where it came from: ``max_tokens=``, the model's entry in litellm's map,
    else the seed's default of 128,000 tokens (logged, and reported by ``get_state()``)."""
    if max_tokens is not None:
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise ConfigurationError(f"max_tokens must be a positive integer, got {max_tokens!r}")
        return max_tokens, "max_tokens"
    window = input_window(model) if model is not None else None
    if window is not None:
        return window, "model"
    why = "no model" if model is None else f"model {model!r} is not in litellm's map"
    log.info(
        "ContextManager: %s and no max_tokens; using the default window of %d tokens",
        why,
        DEFAULT_MAX_TOKENS,
    )
    return DEFAULT_MAX_TOKENS, "default"
