"""Deterministic token counting for tests: one token per character, plus the per-message
overhead ``ctxstore.tokens`` adds (3 per message and the role's characters)."""

from __future__ import annotations

from typing import Any

from ctxstore.messages.tokens import count_tokens


def letters(text: str) -> int:
    """The test estimator: a token per character."""
    return len(text)


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def tokens_of(message: dict[str, Any]) -> int:
    """What a store counting with :func:`letters` stores for ``message``."""
    return count_tokens(message, estimate_tokens=letters)
