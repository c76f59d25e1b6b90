"""``engine.inspect()``: a JSON-serializable snapshot of an engine's next LLM call.

``estimate``: the tokens the next ``resolve()`` would send, their price and the model's limits
(from litellm's bundled map, read offline: :mod:`ctxstore.window.model_info`), and the share of each
part (every context fragment, the summary, the stored history, every pending message);
``rendered``: the system prompt; ``fragments``: the context, pending and persisted parts;
``graph``: every message, branch and checkpoint of the chat; ``meta``: chat, branch, time.
The per-part counts add up to the total, so a dashboard can show where a context's tokens go.
"""

from __future__ import annotations

import time
from typing import Any

from ctxstore.engine.prompt_buffer import PromptBuffer
from ctxstore.engine.session import ChatSession
from ctxstore.messages.tokens import REPLY_PRIMING_TOKENS, MessageCounter, tokenizer_for
from ctxstore.models import ChainSize, ChatGraph
from ctxstore.prompt.messages import message_payload
from ctxstore.prompt.renderers import Renderer, XmlRenderer
from ctxstore.prompt.serialization import fragment_to_dict
from ctxstore.window.model_info import ModelInfo, model_info


def snapshot(
    prompt: PromptBuffer,
    session: ChatSession,
    size: ChainSize,
    graph: ChatGraph,
    model: str | None,
    count: MessageCounter,
    renderer: Renderer | None,
) -> dict[str, Any]:
    """The snapshot of ``prompt`` and ``session`` with the branch's stored ``size`` and the
    chat's ``graph`` (see the module docstring), counted with ``count``."""
    info = model_info(model) if model is not None else None
    rendered = prompt.system_prompt(renderer, session.summary)
    chosen = renderer or XmlRenderer()
    parts: list[dict[str, Any]] = []
    for fragment in prompt.context:
        text = chosen.render([fragment])
        parts.append(_part("context", fragment.name, fragment.id, _text_tokens(count, text), info))
    if rendered:
        # The system message's own overhead and the joins between sections, so parts add up.
        system = count({"role": "system", "content": rendered})
        parts.append(_part("system", "system message", None, system - _sum(parts), info))
    summary_tokens = session.summary["tokens"] if session.summary is not None else 0
    history = size.context_tokens - summary_tokens
    parts.append(_part("persisted", "history", None, history, info))
    for item in prompt.pending:
        tokens = count(message_payload(item))
        parts.append(_part("pending", item.name, item.id, tokens, info))
    parts.append(_part("overhead", "reply priming", None, REPLY_PRIMING_TOKENS, info))
    total = _sum(parts)
    limit = info.max_input_tokens if info is not None else None
    return {
        "estimate": {
            "model": model,
            "tokenizer": tokenizer_for(model),
            "provider": info.provider if info is not None else None,
            "tokens": total,
            "cost_usd": info.input_cost(total) if info is not None else None,
            "context_limit": limit,
            "output_limit": info.max_output_tokens if info is not None else None,
            "exceeded": limit is not None and total > limit,
            "fragments": parts,
        },
        "rendered": rendered,
        "fragments": {
            "context": [fragment_to_dict(fragment) for fragment in prompt.context],
            "pending": [fragment_to_dict(fragment) for fragment in prompt.pending],
            "persisted": {
                "messages": size.messages,
                "tokens": size.tokens,
                "context_tokens": size.context_tokens,
                "summary": dict(session.summary) if session.summary is not None else None,
            },
        },
        "graph": graph.model_dump(mode="json"),
        "meta": {
            "chat_id": session.chat_id,
            "user_id": session.user_id,
            "branch": session.branch,
            "head": session.head,
            "time": int(time.time() * 1000),
        },
    }


def _text_tokens(count: MessageCounter, text: str) -> int:
    """The tokens of a text alone: a message's count minus that of the same message empty."""
    return count({"role": "system", "content": text}) - count({"role": "system", "content": ""})


def _part(
    kind: str, name: str, part_id: str | None, tokens: int, info: ModelInfo | None
) -> dict[str, Any]:
    return {
        "kind": kind,
        "name": name,
        "id": part_id,
        "tokens": tokens,
        "cost_usd": info.input_cost(tokens) if info is not None else None,
    }


def _sum(parts: list[dict[str, Any]]) -> int:
    return sum(int(part["tokens"]) for part in parts)
