"""Token counting: tokenizer choice, offline encodings, per-message overhead, bad input."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ctxstore import ValidationError
from ctxstore.messages.tokens import (
    REPLY_PRIMING_TOKENS,
    count_tokens,
    estimate_from_characters,
    message_counter,
    tokenizer_for,
)


def letters(text: str) -> int:
    return len(text)


@pytest.mark.parametrize(
    ("model", "tokenizer"),
    [
        (None, "tiktoken:o200k_base"),
        ("gpt-4o", "tiktoken:o200k_base"),
        ("gpt-4.1-mini", "tiktoken:o200k_base"),
        ("openai/gpt-5", "tiktoken:o200k_base"),
        ("o3-mini", "tiktoken:o200k_base"),
        ("azure/gpt-4o-2024-08-06", "tiktoken:o200k_base"),
        ("gpt-4", "tiktoken:cl100k_base"),
        ("gpt-3.5-turbo", "tiktoken:cl100k_base"),
        ("claude-3-5-sonnet-20241022", "estimate"),
        ("mistral/mistral-large-latest", "estimate"),
        ("claude-2.1", "litellm"),
    ],
)
def test_each_model_family_gets_its_tokenizer(model: str | None, tokenizer: str) -> None:
    assert tokenizer_for(model) == tokenizer


def test_openai_encodings_count_real_tokens_offline() -> None:
    # "hello world" is 2 tokens in both encodings; the estimate would say 3.
    assert count_tokens("hello world") == 2
    assert count_tokens("hello world", "gpt-4") == 2
    # o200k_base and cl100k_base differ on longer text: both are really used.
    text = "Die Straßenbahn fährt über die Brücke. 東京タワーは高い。"
    assert count_tokens(text, "gpt-4o") != count_tokens(text, "gpt-4")


def test_unknown_models_are_estimated_at_four_characters_a_token() -> None:
    assert count_tokens("x" * 401, "mistral/mistral-large") == 101
    assert estimate_from_characters("") == 0


def test_litellm_counts_the_models_it_has_a_tokenizer_for() -> None:
    assert count_tokens("hello there, how are you today?", "claude-2.1") > 0


def test_message_overhead_follows_the_openai_recipe() -> None:
    message = {"role": "user", "content": "abcd", "name": "ann"}
    # 3 per message + role + content + 1 for the name + the name itself
    assert count_tokens(message, estimate_tokens=letters) == 3 + 4 + 4 + 1 + 3
    # A list adds the reply priming once.
    assert count_tokens([message, message], estimate_tokens=letters) == (
        2 * 15 + REPLY_PRIMING_TOKENS
    )


def test_tool_calls_and_results_count_their_arguments_and_ids() -> None:
    call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "get", "arguments": "{}"}}
        ],
    }
    assert count_tokens(call, estimate_tokens=letters) == 3 + 9 + (3 + 3 + 2)
    result = {"role": "tool", "tool_call_id": "c1", "content": "sunny"}
    assert count_tokens(result, estimate_tokens=letters) == 3 + 4 + 5 + 2


def test_content_parts_count_text_and_images() -> None:
    message = {
        "role": "user",
        "content": [
            {"type": "text", "text": "look"},
            {"type": "image_url", "image_url": {"url": "data:..."}},
        ],
    }
    assert count_tokens(message, estimate_tokens=letters) == 3 + 4 + 4 + 85


@pytest.mark.parametrize("bad", [-1, 1.5, "3", None, True])
def test_an_estimator_returning_nonsense_is_a_validation_error(bad: object) -> None:
    with pytest.raises(ValidationError, match="estimate_tokens"):
        count_tokens("text", estimate_tokens=lambda _text: bad)  # type: ignore[arg-type,return-value]


def test_bad_arguments_are_validation_errors() -> None:
    with pytest.raises(ValidationError):
        count_tokens(b"bytes")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="messages\\[1\\]"):
        count_tokens([{"role": "user", "content": "a"}, "not a message"])  # type: ignore[list-item]
    with pytest.raises(ValidationError, match="estimate_tokens"):
        message_counter(estimate_tokens="len")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="model"):
        message_counter(model=4)  # type: ignore[arg-type]


def test_counting_needs_no_network_and_import_ctxstore_loads_no_tokenizer() -> None:
    """A fresh interpreter with no cache dir set counts with litellm's bundled encodings, and
    ``import ctxstore`` alone loads neither tiktoken nor litellm."""
    code = (
        "import os, sys; os.environ.pop('TIKTOKEN_CACHE_DIR', None)\n"
        "import ctxstore\n"
        "assert 'tiktoken' not in sys.modules and 'litellm' not in sys.modules\n"
        "from ctxstore.messages.tokens import count_tokens, tokenizer_for\n"
        "assert tokenizer_for('gpt-4o') == 'tiktoken:o200k_base'\n"
        "print(count_tokens('hello world', 'gpt-4o'))\n"
        "assert 'litellm' not in sys.modules\n"
    )
    env = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"}
    env["HTTPS_PROXY"] = env["HTTP_PROXY"] = "http://127.0.0.1:9"  # any download would fail
    done = subprocess.run(
        [sys.executable, "-c", code],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "2"
