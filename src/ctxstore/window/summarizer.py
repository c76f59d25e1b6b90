"""The default summarizer: a litellm model writes the summary, and its input is bounded.

A compaction hands over the messages to summarize (the previous summary first). They are laid
out as a transcript; when transcript, prompt and the reply's allowance fit the summary model's
input window, one call summarizes them. When they do not, the transcript is cut into chunks that
each fit, each chunk is summarized, and the partial summaries are merged the same way
(recursively, if even they do not fit together). A summarizer therefore never sends more than
its model takes: the failure peers hit when the history to compact is itself longer than the
model that compacts it. Sizes are whole requests (the per-message overhead and the reply
priming included), counted with the summary model's tokenizer.

The plan (:func:`summary_plan`, a plan of :class:`ModelRequest` effects, see
:mod:`ctxstore._base.plans`) is driven by :meth:`LiteLLMSummarizer.summarize` (sync,
``litellm.completion``) and :meth:`LiteLLMSummarizer.asummarize` (async,
``litellm.acompletion``): the chunking and merging exist once. A compaction asks its shell for
a summary with a :class:`SummarizeRequest`, answered by :func:`summarizing` /
:func:`asummarizing`.

The summary marker (:data:`~ctxstore.messages.summaries.CONTEXT_SUMMARY`,
:func:`~ctxstore.messages.summaries.is_context_summary`) is in :mod:`ctxstore.messages`: the
summarizer labels an earlier summary in its transcript, the ``ContextManager`` writes and
recognizes them, the store marks the summaries it writes.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ctxstore._base.litellm import aimport_litellm, import_litellm, reply_text
from ctxstore._base.plans import Effect, Plan, aperformer, arun_plan, performer, run_plan
from ctxstore.errors import ConfigurationError, CtxStoreError
from ctxstore.messages.summaries import CONTEXT_SUMMARY, is_context_summary
from ctxstore.messages.text import called_tools, item_text, message_label, message_text
from ctxstore.messages.tokens import TokenCounter, count_tokens
from ctxstore.ui.to_model import model_messages_of
from ctxstore.window.model_info import model_info

__all__ = [
    "CONTEXT_SUMMARY",
    "DEFAULT_SUMMARY_PROMPT",
    "DEFAULT_SUMMARY_TOKENS",
    "MERGE_PROMPT",
    "LiteLLMSummarizer",
    "ModelRequest",
    "SummarizerError",
    "input_window",
    "is_context_summary",
    "litellm_summarizer",
    "request_messages",
    "summary_plan",
    "transcript_lines",
]


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
#: A token is assumed to span at most this many characters when a long text is cut to size (a
#: bound on the search, not on correctness: every piece is counted).
_MAX_CHARACTERS_PER_TOKEN = 16


@dataclass(frozen=True, slots=True)
class SummarizeRequest:
    """What a compaction asks its shell for (an :class:`~ctxstore._base.plans.Effect`): the
    summary text of ``messages`` (the previous summary first, as a marked message)."""

    messages: list[dict[str, Any]]


#: A summarizer: the messages to summarize -> the summary text (sync, or async for the async
#: drivers).
Summarize = Callable[[list[dict[str, Any]]], str]
AsyncSummarize = Callable[[list[dict[str, Any]]], "Awaitable[str] | str"]


def no_summarizer(_messages: list[dict[str, Any]]) -> str:
    """The summarizer of a plan that must not need one."""
    raise ConfigurationError("this plan asked for a summary, and no summarizer was given")


def summarizing(summarize: Summarize) -> Callable[[Any], str]:
    """The sync shell's answer to a :class:`SummarizeRequest`: ``summarize`` of its messages
    (an async summarizer is refused: it needs the async drivers)."""

    def handle(request: Any) -> str:
        if not isinstance(request, SummarizeRequest):
            raise ConfigurationError(f"a compaction does not ask for {request!r}")
        if inspect.iscoroutinefunction(summarize):
            raise ConfigurationError(
                "the summarizer is async: compact with the async store and driver"
            )
        return summarize(request.messages)

    return handle


def asummarizing(summarize: AsyncSummarize) -> Callable[[Any], Awaitable[str]]:
    """The async shell's answer to a :class:`SummarizeRequest`: an async summarizer awaited, a
    sync one (``litellm.completion``, a plain function) run in a thread, so the event loop keeps
    serving other jobs and signals meanwhile."""

    async def handle(request: Any) -> str:
        if not isinstance(request, SummarizeRequest):
            raise ConfigurationError(f"a compaction does not ask for {request!r}")
        if inspect.iscoroutinefunction(summarize):
            text: str = await summarize(request.messages)
            return text
        value = await asyncio.to_thread(summarize, request.messages)
        return await value if inspect.isawaitable(value) else value

    return handle


class SummarizerError(CtxStoreError):
    """The summary model returned no text, or its summaries cannot be merged within its window."""


def input_window(model: str) -> int | None:
    """``model``'s input window: from litellm's bundled map read as a file (milliseconds), else
    from ``litellm.get_model_info`` (imported only then: it knows more aliases and provider
    prefixes); None when neither knows it."""
    info = model_info(model)
    if info is not None and info.max_input_tokens is not None:
        return info.max_input_tokens
    try:
        found = import_litellm().get_model_info(model)
    except ConfigurationError:
        return None  # litellm is not installed
    except Exception:  # litellm raises a bare Exception for a model it does not know
        return None
    window = found.get("max_input_tokens") if isinstance(found, Mapping) else None
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        return None
    return window


@dataclass(frozen=True)
class ModelRequest:
    """One call of the summary model: its messages."""

    messages: list[dict[str, str]]


def transcript_lines(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """The messages as transcript lines ``role: text``, tool calls and results included (an
    earlier summary is labelled as one, so the model folds it in rather than quoting it). A UI
    message reads as the model messages it is sent as: its steps, calls and results."""
    lines = []
    for message in (sent for item in messages for sent in model_messages_of(item)):
        role = message_label(message) or "unknown"
        if is_context_summary(message):
            role = "earlier summary"
        elif role in ("tool", "function") and isinstance(message.get("name"), str):
            role = f"{role} {message['name']}"
        text = message_text(message) or item_text(message)
        for name, arguments in called_tools(message):
            text += f" [calls {name}({arguments})]"
        if not text and message.get("content") is not None:
            text = json.dumps(message.get("content"), default=str)
        lines.append(f"{role}: {text.strip()}")
    return lines


def request_messages(prompt: str, transcript: str) -> list[dict[str, str]]:
    """The messages of one summary request: the instructions, then the text to summarize."""
    return [{"role": "system", "content": prompt}, {"role": "user", "content": transcript}]


def summary_plan(
    messages: Sequence[Mapping[str, Any]],
    *,
    prompt: str,
    input_budget: int,
    count: TokenCounter,
) -> Plan[str]:
    """The summary of ``messages`` as a plan of :class:`ModelRequest` effects, none over
    ``input_budget`` tokens (the whole request: prompt, transcript, per-message overhead, reply
    priming; ``count`` counts a text); receives each reply's text, returns the summary."""

    def size(request_prompt: str, transcript: str) -> int:
        return count_tokens(request_messages(request_prompt, transcript), estimate_tokens=count)

    if size(prompt, "") > input_budget // 2 or size(MERGE_PROMPT, "") > input_budget // 2:
        raise ConfigurationError(
            "the summary prompt takes more than half of the summary model's input window"
        )
    texts = transcript_lines(messages)
    current_prompt, merging = prompt, False
    while True:

        def fits(transcript: str, request_prompt: str = current_prompt) -> bool:
            return size(request_prompt, transcript) <= input_budget

        room = input_budget - size(current_prompt, "")
        chunks = _chunks(texts, room, count, fits)
        if merging and len(chunks) >= len(texts):
            raise SummarizerError(
                f"{len(texts)} partial summaries do not fit together in the summary model's "
                "window: raise the window or lower the summary's token allowance"
            )
        partials = []
        for chunk in chunks:
            reply = yield Effect(ModelRequest(request_messages(current_prompt, chunk)))
            if not isinstance(reply, str) or not reply.strip():
                raise SummarizerError("the summary model returned no text")
            partials.append(reply.strip())
        if len(partials) == 1:
            return partials[0]
        texts, current_prompt, merging = partials, MERGE_PROMPT, True


def _chunks(
    lines: Sequence[str], room: int, count: TokenCounter, fits: Callable[[str], bool]
) -> list[str]:
    """Consecutive lines joined into transcripts that each fit (``fits`` has the last word); a
    line longer than ``room`` is cut into pieces, none of its text dropped."""
    pieces = [piece for line in lines for piece in _split_text(line, room, count)]
    groups: list[list[str]] = [[]]
    used = 0
    for piece in pieces:
        tokens = count(piece) + 1  # the newline that joins it
        if used + tokens > room and groups[-1]:
            groups.append([])
            used = 0
        groups[-1].append(piece)
        used += tokens
    return [text for group in groups for text in _fitting(group, fits)]


def _fitting(group: list[str], fits: Callable[[str], bool]) -> list[str]:
    """``group`` joined, or halved until each half fits (a joint can tokenize differently from
    its parts; a single piece always fits, it was cut to size)."""
    joined = "\n".join(group)
    if len(group) == 1 or fits(joined):
        return [joined]
    half = len(group) // 2
    return _fitting(group[:half], fits) + _fitting(group[half:], fits)


def _split_text(text: str, room: int, count: TokenCounter) -> list[str]:
    """``text`` in consecutive pieces of at most ``room`` tokens, cut at a space when one is
    near the limit."""
    pieces: list[str] = []
    rest = text
    while count(rest) > room:
        low, high = 0, min(len(rest), room * _MAX_CHARACTERS_PER_TOKEN)
        while low < high:  # the longest prefix that fits
            middle = (low + high + 1) // 2
            if count(rest[:middle]) <= room:
                low = middle
            else:
                high = middle - 1
        if low == 0:
            raise SummarizerError("the summary model's window cannot hold one character")
        space = rest.rfind(" ", low // 2, low)
        if space > 0 and count(rest[: space + 1]) <= room:
            low = space + 1
        pieces.append(rest[:low])
        rest = rest[low:]
    pieces.append(rest)
    return pieces


class LiteLLMSummarizer:
    """Summaries by any litellm model. ``max_input_tokens`` defaults to the model's window in
    litellm's bundled map; ``summary_tokens`` is the reply's allowance (sent as ``max_tokens``
    and kept free in the window); ``estimate_tokens`` replaces the model's tokenizer;
    ``completion`` / ``acompletion`` replace litellm's (tests), and ``options`` go to every call
    (``api_key``, ``temperature``, litellm's ``mock_response``)."""

    def __init__(
        self,
        model: str,
        *,
        prompt: str | None = None,
        max_input_tokens: int | None = None,
        summary_tokens: int = DEFAULT_SUMMARY_TOKENS,
        estimate_tokens: TokenCounter | None = None,
        completion: Callable[..., Any] | None = None,
        acompletion: Callable[..., Awaitable[Any]] | None = None,
        **options: Any,
    ) -> None:
        if not isinstance(model, str) or not model:
            raise ConfigurationError(f"summary_model must be a litellm model name, got {model!r}")
        if prompt is not None and (not isinstance(prompt, str) or not prompt.strip()):
            raise ConfigurationError(f"summary_prompt must be a non-empty text, got {prompt!r}")
        if max_input_tokens is None:
            max_input_tokens = input_window(model)
        if max_input_tokens is None:
            raise ConfigurationError(
                f"the input window of summary model {model!r} is unknown to litellm's model map: "
                "pass its window (summary_max_tokens= on a ContextManager)"
            )
        for name, value in (
            ("max_input_tokens", max_input_tokens),
            ("summary_tokens", summary_tokens),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigurationError(f"{name} must be a positive integer, got {value!r}")
        if max_input_tokens <= summary_tokens:
            raise ConfigurationError(
                f"summary_tokens ({summary_tokens}) must be below the summary model's window "
                f"({max_input_tokens})"
            )
        for name, function in (("completion", completion), ("acompletion", acompletion)):
            if function is not None and not callable(function):
                raise ConfigurationError(f"{name} must be a function, got {function!r}")
        self.model = model
        self.prompt = prompt or DEFAULT_SUMMARY_PROMPT
        self.max_input_tokens = max_input_tokens
        self.input_budget = max_input_tokens - summary_tokens
        self.summary_tokens = summary_tokens
        self.estimate_tokens = estimate_tokens
        self._completion = completion
        self._acompletion = acompletion
        self.options = options

    def plan(self, messages: Sequence[Mapping[str, Any]]) -> Plan[str]:
        """The requests that summarize ``messages`` (see :func:`summary_plan`)."""
        return summary_plan(
            messages,
            prompt=self.prompt,
            input_budget=self.input_budget,
            count=lambda text: count_tokens(text, self.model, estimate_tokens=self.estimate_tokens),
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

        def ask(request: ModelRequest) -> str:
            return _text(call(**self._kwargs(request)))

        return run_plan(self.plan(messages), performer(handle=ask))

    async def asummarize(self, messages: Sequence[Mapping[str, Any]]) -> str:
        """The summary of ``messages``, through ``litellm.acompletion``."""
        call = self._acompletion or (await aimport_litellm()).acompletion

        async def ask(request: ModelRequest) -> str:
            return _text(await call(**self._kwargs(request)))

        return await arun_plan(self.plan(messages), aperformer(handle=ask))


def _text(response: Any) -> str:
    try:
        return reply_text(response)
    except (TypeError, KeyError, IndexError, AttributeError) as error:
        raise SummarizerError(f"the summary model's reply holds no text ({error})") from error


def litellm_summarizer(model: str, **options: Any) -> Callable[[list[dict[str, Any]]], Any]:
    """The async summarize function a worker calls for ``--summary-model``."""
    return LiteLLMSummarizer(model, **options).asummarize
