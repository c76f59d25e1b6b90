"""The context window page and the summaries page (loaded on first use: the window policy reads
litellm's bundled model map).

The context window is what the next ``resolve()`` of a ``ContextEngine`` would send for a model
and a token budget, read the way resolve reads it: the branch's newest summary, then the
messages after it, newest first within the budget (stored counts), a tool result never the
first message kept, so a tool call and its results are kept or cut together. The page shows
each message with its tokens, where the cut falls and why, and the context against the model's
window with the ``ContextManager``'s soft and hard thresholds (0.75 and 0.90 of the window less
the reply reserve, its defaults) and the price of the input.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from ctxstore._core.format.fields import scored_pairs
from ctxstore._core.format.summaries import parse_summary_member
from ctxstore._core.format.tokens import TOK_WIDTH, entry_at
from ctxstore._core.ops import reads
from ctxstore._core.protocol import Call, Operation, command_call, together
from ctxstore._core.state import StoreState
from ctxstore.errors import ChatNotFoundError, CtxStoreError
from ctxstore.messages.text import message_label, preview
from ctxstore.models import BranchChain, ChainSize, StoredSummary
from ctxstore.window.manager import ContextManager
from ctxstore.window.model_info import model_info


@dataclass(frozen=True)
class ContextLine:
    id: str
    role: str
    preview: str
    tokens: int
    tool_group: bool


@dataclass(frozen=True)
class ContextView:
    branch: str
    model: str
    budget: int | None
    window: int | None
    soft: int | None
    hard: int | None
    summary: StoredSummary | None
    lines: tuple[ContextLine, ...]
    sent_tokens: int
    context_tokens: int
    cut_tokens: int
    cut_reason: str
    cost_usd: float | None

    def share(self, tokens: int) -> float:
        """``tokens`` as a percentage of the window (of the sent tokens without one)."""
        whole = self.window or max(self.sent_tokens, 1)
        return min(100.0, 100.0 * tokens / whole)


def context_view(
    state: StoreState, chat_id: str, branch: str | None, model: str, budget: int | None
) -> Operation[ContextView]:
    manager = _manager(model)
    # A budget given is resolve()'s max_tokens; without one, a resolve past the hard threshold
    # compacts first, so the most it sends is the hard threshold.
    limit = budget if budget else (manager.hard_tokens if manager is not None else None)
    kept_or_error, size = yield from together(
        [
            reads.load_branch(state, chat_id, branch, max_tokens=limit, after_summary=True),
            reads.branch_size(state, chat_id, branch),
        ]
    )
    if isinstance(kept_or_error, CtxStoreError):
        raise kept_or_error
    kept = cast("BranchChain", kept_or_error)
    lines = []
    for message in kept.messages:
        payload = message["message"]
        calls = bool(payload.get("tool_calls")) or payload.get("role") == "tool"
        lines.append(
            ContextLine(
                message["id"],
                message_label(payload),
                preview(payload),
                state.message_tokens(payload),
                calls,
            )
        )
    sent = kept.tokens if kept.tokens >= 0 else sum(line.tokens for line in lines)
    context = size.context_tokens if isinstance(size, ChainSize) else sent
    cut = max(0, context - sent)
    reason = "nothing cut: the whole history after the summary fits"
    if cut:
        reason = (
            f"older messages holding {cut} tokens are cut to keep within {limit} tokens; a tool "
            "result is never the first message kept, so a tool call and its results are kept "
            "or cut together"
        )
    info = model_info(model)
    return ContextView(
        branch=kept.branch.name,
        model=model,
        budget=budget,
        window=manager.max_tokens if manager is not None else None,
        soft=manager.soft_tokens if manager is not None else None,
        hard=manager.hard_tokens if manager is not None else None,
        summary=kept.summary,
        lines=tuple(lines),
        sent_tokens=sent,
        context_tokens=context,
        cut_tokens=cut,
        cut_reason=reason,
        cost_usd=info.input_cost(sent) if info is not None else None,
    )


def _manager(model: str) -> ContextManager | None:
    try:
        return ContextManager(model)
    except CtxStoreError:  # a model litellm's map does not know, and no budget given
        return None


@dataclass(frozen=True)
class SummaryLine:
    summary: StoredSummary
    covered_messages: int
    tokens_before: int | None
    written_by: str


def summaries_view(state: StoreState, chat_id: str) -> Operation[list[SummaryLine]]:
    """Each summary of the chat (the newest 100), newest first: the messages it covers (its
    chain from the root through its message), the tokens those held (stored counts) and who
    wrote it (the ``model``, ``job`` or ``worker`` of its metadata). Two round trips."""
    chat = state.keyspace.chat(chat_id)
    keys = {name: chat.key(name) for name in ("chat", "summary", "runs", "tok")}
    exists, flat = yield (
        command_call(("EXISTS", keys["chat"]), (keys["chat"],)),
        command_call(  # (ZREVRANGEBYSCORE: deploy/acl.conf's tenant users have it)
            ("ZREVRANGEBYSCORE", keys["summary"], "+inf", "-inf", "WITHSCORES", "LIMIT", 0, 100),
            (keys["summary"],),
        ),
    )
    for outcome in (exists, flat):
        if isinstance(outcome, CtxStoreError):
            raise outcome
    if not exists:
        raise ChatNotFoundError(f"chat {chat_id!r} not found", chat_id=chat_id)
    found = scored_pairs(flat)
    positions = [int(float(score)) for _member, score in found]
    if not positions:
        return []
    calls: list[Call[Any]] = []
    for position in positions:
        calls.append(
            command_call(
                ("ZREVRANGEBYSCORE", keys["runs"], position, "-inf", "LIMIT", 0, 1), (keys["runs"],)
            )
        )
        start = position * TOK_WIDTH
        calls.append(
            command_call(("GETRANGE", keys["tok"], start, start + TOK_WIDTH - 1), (keys["tok"],))
        )
    replies = yield tuple(calls)
    lines = []
    for index, position in enumerate(positions):
        summary = parse_summary_member(found[index][0], keys["summary"], position)
        run, tok = replies[2 * index], replies[2 * index + 1]
        depth = 0
        if not isinstance(run, CtxStoreError) and run:
            member = run[0].decode() if isinstance(run[0], bytes) else str(run[0])
            first, _parent, first_depth = (int(part) for part in member.split(":"))
            depth = first_depth + position - first
        before = None
        if not isinstance(tok, CtxStoreError) and len(tok or b"") == TOK_WIDTH:
            before = entry_at(tok, 0)[1]
        metadata = summary.get("metadata") or {}
        writer = metadata.get("model") or metadata.get("job") or metadata.get("worker") or "?"
        lines.append(SummaryLine(summary, depth, before, str(writer)))
    return lines
