"""Token usage in any of the spellings LLM clients report it.

Providers and SDKs disagree on names: OpenAI chat completions say ``prompt_tokens`` /
``completion_tokens`` with ``*_tokens_details``, the Responses API and Anthropic say
``input_tokens`` / ``output_tokens``, Anthropic adds ``cache_read_input_tokens`` and
``cache_creation_input_tokens``; the JavaScript SDKs say ``inputTokens`` / ``outputTokens`` /
``totalTokens`` (older ones ``promptTokens`` / ``completionTokens``). :func:`normalize_usage`
reads all of them (dicts, litellm and
OpenAI usage objects) into one set of counters that the store accumulates atomically.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ctxstore.errors import ValidationError

USAGE_COUNTERS = (
    "input_tokens",
    "output_tokens",
    "total_tokens",
    "cached_input_tokens",
    "cache_creation_input_tokens",
    "reasoning_tokens",
)

# counter -> where to look, in order; a dotted path reads a nested details object.
_SOURCES: dict[str, tuple[str, ...]] = {
    "input_tokens": ("input_tokens", "prompt_tokens", "inputTokens", "promptTokens"),
    "output_tokens": ("output_tokens", "completion_tokens", "outputTokens", "completionTokens"),
    "total_tokens": ("total_tokens", "totalTokens"),
    "cached_input_tokens": (
        "cached_input_tokens",
        "prompt_tokens_details.cached_tokens",
        "input_tokens_details.cached_tokens",
        "cache_read_input_tokens",
        "cachedInputTokens",
    ),
    "cache_creation_input_tokens": ("cache_creation_input_tokens",),
    "reasoning_tokens": (
        "reasoning_tokens",
        "completion_tokens_details.reasoning_tokens",
        "output_tokens_details.reasoning_tokens",
        "reasoningTokens",
    ),
}


def normalize_usage(usage: Mapping[str, Any] | object) -> dict[str, int]:
    """Counters found in ``usage``; ``total_tokens`` defaults to input + output.

    Raises :class:`~ctxstore.errors.ValidationError` for negative or non-integer counts and for
    a usage that holds no count at all (almost always the wrong object passed).
    """
    source = _as_mapping(usage)
    counters: dict[str, int] = {}
    for counter, paths in _SOURCES.items():
        for path in paths:
            value = _lookup(source, path)
            if value is not None:
                counters[counter] = _count(value, path)
                break
    if not counters:
        raise ValidationError(
            "usage holds no token counts (expected input_tokens/output_tokens, "
            "prompt_tokens/completion_tokens or inputTokens/outputTokens)"
        )
    if "total_tokens" not in counters and (
        "input_tokens" in counters or "output_tokens" in counters
    ):
        counters["total_tokens"] = counters.get("input_tokens", 0) + counters.get(
            "output_tokens", 0
        )
    return counters


def _as_mapping(value: object) -> Mapping[str, Any]:
    if isinstance(value, Mapping):
        return value
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        dumped = dump()
        if isinstance(dumped, Mapping):
            return dumped
    if hasattr(value, "__dict__"):
        return {k: v for k, v in vars(value).items() if not k.startswith("_")}
    raise ValidationError(f"usage must be a mapping or a usage object, got {type(value).__name__}")


def _lookup(source: Mapping[str, Any], path: str) -> Any:
    value: Any = source
    for part in path.split("."):
        if value is None:
            return None
        value = value.get(part) if isinstance(value, Mapping) else getattr(value, part, None)
    return value


#: The largest count one usage may add (and a counter may reach): 2^53, where the scripts' Lua
#: numbers stop being exact. Far beyond any model's usage.
MAX_COUNT = 2**53


def _count(value: Any, path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        if isinstance(value, float) and value.is_integer() and value >= 0:
            value = int(value)
        else:
            raise ValidationError(f"usage {path} must be a non-negative integer, got {value!r}")
    if value > MAX_COUNT:
        raise ValidationError(f"usage {path} is {value}, over the limit of {MAX_COUNT}")
    return int(value)
