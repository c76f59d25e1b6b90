"""Pure helpers over message dicts (no I/O, no store): tool groups and where a history may be
cut, token counts, usage in any provider's spelling, readable text and previews, and the
context-summary marker."""

from ctxstore.messages.summaries import (
    CONTEXT_SUMMARY,
    is_context_summary,
    summary_section,
)
from ctxstore.messages.text import message_text, preview
from ctxstore.messages.tokens import count_tokens, tokenizer_for
from ctxstore.messages.tool_groups import (
    calls_tools,
    continues_tool_group,
    is_tool_call_item,
    is_tool_result,
    safe_cut_point,
    tool_group_end,
    tool_group_start,
    tool_groups,
)
from ctxstore.messages.usage import normalize_usage

__all__ = [
    "CONTEXT_SUMMARY",
    "calls_tools",
    "continues_tool_group",
    "count_tokens",
    "is_context_summary",
    "is_tool_call_item",
    "is_tool_result",
    "message_text",
    "normalize_usage",
    "preview",
    "safe_cut_point",
    "summary_section",
    "tokenizer_for",
    "tool_group_end",
    "tool_group_start",
    "tool_groups",
]
