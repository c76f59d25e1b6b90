"""One compaction of one branch: the step a worker's job and an inline compaction share.

Under the chat's compaction lease (one summarizer per chat at once), read the branch from its
newest summary on, keep the newest ``min_recent_messages`` verbatim (never starting the kept part
with a tool result, so a tool call stays with its results), summarize the rest together with the
previous summary, and attach the new summary to the last message it covers. Nothing is deleted
or rewritten: messages appended meanwhile come after that message, untouched, and a branch forked
before it never sees the summary.

The step is written once, as a plan (:mod:`ctxstore._base.plans`: store operations and one
:class:`~ctxstore.window.summarizer.SummarizeRequest` effect); :func:`run_compaction` and
:func:`arun_compaction` drive it with a sync store and summarizer or an async one.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypedDict

from ctxstore._base.plans import (
    Effect,
    Plan,
    Run,
    aperformer,
    arun_plan,
    performer,
    run_plan,
)
from ctxstore._core.ops import leases, reads
from ctxstore._core.ops.summaries import write_summary
from ctxstore._core.state import StoreState
from ctxstore.errors import ConfigurationError, ValidationError
from ctxstore.messages.summaries import summary_message
from ctxstore.messages.tokens import MessageCounter
from ctxstore.messages.tool_groups import safe_cut_point as cut_point
from ctxstore.models import BranchChain, StoredSummary
from ctxstore.window.summarizer import (
    AsyncSummarize,
    Summarize,
    SummarizeRequest,
    asummarizing,
    no_summarizer,
    summarizing,
)


class _Scope(TypedDict):
    user_id: str | None
    incarnation: str | None


#: How long a compaction may hold its chat's lease (a summarizer call included), by default.
DEFAULT_LEASE_TTL_MS = 10 * 60 * 1000


@dataclass(frozen=True)
class CompactionPolicy:
    """What a compaction keeps and how long it may hold the chat.

    ``soft_tokens``: a job is a no-op unless the branch's context (newest summary plus the
    messages after it) is at least this big when it runs (None: always compact).
    ``summary_model``: recorded in the summary's metadata.
    """

    min_recent_messages: int = 4
    soft_tokens: int | None = None
    lease_ttl_ms: int = DEFAULT_LEASE_TTL_MS
    summary_model: str | None = None

    def __post_init__(self) -> None:
        for name in ("min_recent_messages", "soft_tokens", "lease_ttl_ms"):
            value = getattr(self, name)
            if value is None and name == "soft_tokens":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigurationError(f"{name} must be a non-negative integer, got {value!r}")
        if self.lease_ttl_ms < 1:
            raise ConfigurationError("lease_ttl_ms must be positive")


@dataclass(frozen=True)
class CompactionResult:
    """What one compaction did. ``skipped`` says why nothing was written (None: a summary was
    written or found): ``"leased"`` (another summarizer holds the chat), ``"not due"`` (the
    context is below the threshold), ``"too short"`` (nothing older than the kept messages)."""

    chat_id: str
    branch: str
    summary: StoredSummary | None = None
    written: bool = False
    covered: int = 0
    tokens_before: int = 0
    tokens_after: int = 0
    context_tokens: int = 0
    skipped: str | None = None
    details: dict[str, Any] = field(default_factory=dict)


def compaction(
    state: StoreState,
    chat_id: str,
    branch: str | None,
    policy: CompactionPolicy,
    count_message: MessageCounter,
    *,
    job: str = "",
    user_id: str | None = None,
    incarnation: str | None = None,
) -> Plan[CompactionResult]:
    """Compact ``branch`` (the active one for None) once; see the module docstring."""
    token = leases.new_lease_token()
    scope = _Scope(user_id=user_id, incarnation=incarnation)
    taken, _expires = yield Run(
        leases.take_lease(state, chat_id, token, policy.lease_ttl_ms, **scope)
    )
    name = branch or ""
    if not taken:
        return CompactionResult(chat_id, name, skipped="leased")
    settled = ""
    try:
        chain: BranchChain = yield Run(
            reads.load_branch(state, chat_id, branch, after_summary=True, **scope)
        )
        name = chain.branch.name
        result = yield from _summarize(state, chat_id, chain, policy, count_message, job, scope)
        if result.skipped is not None:
            settled = job  # nothing was due: the job is done all the same
        return result
    finally:
        yield Run(leases.give_lease(state, chat_id, token, job=settled, **scope))


def _summarize(
    state: StoreState,
    chat_id: str,
    chain: BranchChain,
    policy: CompactionPolicy,
    count_message: MessageCounter,
    job: str,
    scope: _Scope,
) -> Plan[CompactionResult]:
    name, context = chain.branch.name, chain.context_tokens
    if policy.soft_tokens is not None and context < policy.soft_tokens:
        return CompactionResult(chat_id, name, context_tokens=context, skipped="not due")
    payloads = [stored["message"] for stored in chain.messages]
    cut = cut_point(payloads, policy.min_recent_messages)
    if cut == 0:
        return CompactionResult(chat_id, name, context_tokens=context, skipped="too short")
    previous = chain.summary
    inputs = ([summary_message(previous)] if previous is not None else []) + payloads[:cut]
    text = yield Effect(SummarizeRequest(inputs))
    if not isinstance(text, str) or not text.strip():
        raise ValidationError(f"the summarizer returned no text: {text!r}")
    before = (previous["tokens"] if previous is not None else 0) + sum(
        count_message(payload) for payload in payloads[:cut]
    )
    after = count_message({"role": "assistant", "content": text})
    covered = cut + (int(previous["metadata"].get("covered", 0)) if previous is not None else 0)
    metadata: dict[str, Any] = {
        "covered": covered,
        "tokens_before": before,
        "tokens_after": after,
        "last_message_id": chain.messages[cut - 1]["id"],
    }
    if policy.summary_model is not None:
        metadata["model"] = policy.summary_model
    written = yield Run(
        write_summary(
            state,
            chat_id,
            chain.messages[cut - 1]["id"],
            text,
            metadata,
            after,
            job=job,
            **scope,
        )
    )
    return CompactionResult(
        chat_id,
        name,
        summary=written["summary"],
        written=written["written"],
        covered=covered,
        tokens_before=before,
        tokens_after=after,
        context_tokens=context,
    )


def run_compaction(
    run: Callable[[Any], Any],
    steps: Plan[CompactionResult],
    summarize: Summarize = no_summarizer,
) -> CompactionResult:
    """Drive a compaction with a sync store's ``run`` and a sync summarizer."""
    return run_plan(steps, performer(run, summarizing(summarize)))


async def arun_compaction(
    run: Callable[[Any], Awaitable[Any]],
    steps: Plan[CompactionResult],
    summarize: AsyncSummarize = no_summarizer,
) -> CompactionResult:
    """Drive a compaction with an async store's ``run`` and a sync or async summarizer (a sync
    one runs in a thread, so the event loop keeps serving other jobs meanwhile)."""
    return await arun_plan(steps, aperformer(run, asummarizing(summarize)))


__all__ = [
    "CompactionPolicy",
    "CompactionResult",
    "arun_compaction",
    "compaction",
    "run_compaction",
]
