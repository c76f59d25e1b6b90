"""What an engine will send that is not stored: context fragments, rendered into the system
prompt, and pending messages, which the next save stores.

No I/O and no store: the buffer renders and counts; the engine core decides when to read and
write (:mod:`ctxstore.engine.core`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ctxstore._base.plans import Plan
from ctxstore._core.ids import check_request_id, new_request_id
from ctxstore.errors import ValidationError
from ctxstore.messages.summaries import summary_section
from ctxstore.messages.tokens import REPLY_PRIMING_TOKENS, MessageCounter
from ctxstore.models import StoredSummary
from ctxstore.prompt.fragment import Fragment, copy_fragment, walk
from ctxstore.prompt.messages import message_payload, replaces_last_assistant, stored_metadata
from ctxstore.prompt.renderers import (
    MarkdownRenderer,
    Renderer,
    TomlRenderer,
    ToonRenderer,
    XmlRenderer,
)

#: Renderers whose output depends on the fragments and their own settings only.
_PURE_RENDERERS = (XmlRenderer, MarkdownRenderer, TomlRenderer, ToonRenderer)


@dataclass(frozen=True, slots=True)
class ChainBudget:
    """The window a read of the stored chain gets (``None``: no bound)."""

    tokens: int | None
    messages: int | None
    #: Whether pending messages are sent after the chain: then a chain that does not fit is
    #: left out whole, since the newest message to send is a pending one.
    pending: bool

    def over(self, read_tokens: int) -> bool:
        """Whether a windowed read came back over its token budget: the store's fallback for
        a window nothing fits (the newest message, with its tool group), which stands only
        when no pending message is newer."""
        return self.pending and self.tokens is not None and read_tokens > self.tokens


class PromptBuffer:
    """Context fragments (the system prompt) and pending message fragments (the next save)."""

    def __init__(self, count_message: MessageCounter) -> None:
        #: Counts one message's tokens with the engine's tokenizer.
        self.count_message = count_message
        self._context: list[Fragment] = []
        self._materialized: list[bool] = []
        self._rendered: dict[tuple[type[Renderer], bool], str] = {}
        #: Message fragments set and not saved yet, oldest first.
        self.pending: list[Fragment] = []
        #: The pending messages a save was last tried with, and its request id.
        self._request: tuple[tuple[Fragment, ...], str] | None = None

    @property
    def context(self) -> tuple[Fragment, ...]:
        """The context fragments, in the order they were set."""
        return tuple(self._context)

    def add(self, fragments: Iterable[Fragment]) -> None:
        """Queue message fragments; add the others to the context. Both are copied, so later
        changes to the caller's dicts do not leak in."""
        for item in fragments:
            if not isinstance(item, Fragment):
                raise ValidationError(
                    f"set() takes fragments, got {type(item).__name__}; build one with "
                    "fragment(), hint(), user(), ..."
                )
            copied = copy_fragment(item)
            if copied.is_message:
                if not isinstance(copied.data, Mapping):
                    raise ValidationError(f"message fragment {copied.name!r} holds no message dict")
                if not self._replaced_pending_answer(copied):
                    self.pending.append(copied)
            else:
                self._context.append(copied)
                self._materialized.append(False)
                self._rendered.clear()

    def _replaced_pending_answer(self, item: Fragment) -> bool:
        """A ``last_assistant_message`` while an assistant message is pending replaces the
        newest pending one (keeping its id), as the seed does; without one pending it stays a
        replacement of the branch's last stored answer, which the save resolves."""
        if not replaces_last_assistant(item):
            return False
        for index in range(len(self.pending) - 1, -1, -1):
            current = self.pending[index]
            if current.name == "assistant" and not replaces_last_assistant(current):
                item.metadata = stored_metadata(item) or {}
                item.id = current.id
                self.pending[index] = item
                return True
        return False

    def drop_pending(self) -> None:
        """Forget the pending messages (saved, or the engine moved to another branch)."""
        self.pending = []
        self._request = None

    def materialize(self) -> Plan[None]:
        """Materialize the lazy data of the fragments not materialized yet (each once)."""
        for index, item in enumerate(self._context):
            if not self._materialized[index]:
                self._context[index] = yield from walk(item, item.name)
                self._materialized[index] = True
                self._rendered.clear()

    def render(self, renderer: Renderer | None = None) -> str:
        """The system prompt from the (materialized) context fragments.

        The built-in renderers are pure functions of the fragments, so their output is kept
        until the context changes: an engine resolving turn after turn renders once.
        """
        chosen = renderer or XmlRenderer()
        if type(chosen) not in _PURE_RENDERERS:
            return chosen.render(self._context)
        key = (type(chosen), chosen.group_fragments)
        rendered = self._rendered.get(key)
        if rendered is None:
            rendered = self._rendered[key] = chosen.render(self._context)
        return rendered

    def system_prompt(self, renderer: Renderer | None, summary: StoredSummary | None) -> str:
        """The rendered context, followed by the summary section when a summary applies."""
        prompt = self.render(renderer)
        if summary is None:
            return prompt
        section = summary_section(summary["content"])
        return f"{prompt}\n\n{section}" if prompt else section

    def budget_for_chain(self, max_tokens: int | None, max_messages: int | None) -> ChainBudget:
        """What a call's budget leaves the stored chain: the reply priming and the pending
        messages (sent whatever the budget) come off it."""
        if max_tokens is None and max_messages is None:
            return ChainBudget(None, None, pending=False)
        tokens = None
        if max_tokens is not None:
            pending = sum(self.count_message(payload) for payload in self.pending_payloads())
            tokens = max(max_tokens - REPLY_PRIMING_TOKENS - pending, 0)
        messages = None if max_messages is None else max(max_messages - len(self.pending), 0)
        return ChainBudget(tokens, messages, pending=bool(self.pending))

    def request_for_pending(self, request_id: str | None) -> tuple[str, bool]:
        """The request id a save of the pending messages carries, and whether the store should
        look it up whatever the head: the caller's (looked up), else the one this buffer made
        for these very messages, kept until they are saved (a save retried after a timeout
        carries the first attempt's id, and the engine retries onto the head it knew)."""
        if request_id is not None:
            return check_request_id(request_id), True
        kept = self._request
        same = (
            kept is not None
            and len(kept[0]) == len(self.pending)
            and all(a is b for a, b in zip(kept[0], self.pending, strict=True))
        )
        if kept is None or not same:
            kept = self._request = (tuple(self.pending), new_request_id())
        return kept[1], False

    def pending_payloads(self) -> list[dict[str, Any]]:
        """Copies of the pending messages' chat-message dicts."""
        return [message_payload(item) for item in self.pending]

    def count(
        self, context_tokens: int, summary: StoredSummary | None, renderer: Renderer | None
    ) -> int:
        """The tokens of a call from the stored counts: the system message (with the summary
        section), the messages after the summary (``context_tokens`` holds them and the
        summary), the pending ones and the reply priming."""
        tokens = REPLY_PRIMING_TOKENS + context_tokens
        if summary is not None:
            tokens -= summary["tokens"]
        prompt = self.system_prompt(renderer, summary)
        if prompt:
            tokens += self.count_message({"role": "system", "content": prompt})
        return tokens + sum(self.count_message(payload) for payload in self.pending_payloads())
