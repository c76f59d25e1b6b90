"""engine.inspect(): a JSON-serializable snapshot whose parts add up to token_count(), with
prices and limits from litellm's bundled map, read without importing litellm."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

import ctxstore


def test_inspect_adds_up_to_token_count_and_prices_it(make_engine: Any) -> None:
    engine = make_engine(model="gpt-4o")
    engine.set(ctxstore.role("You are terse."), ctxstore.hint("Answer in French."))
    engine.set(ctxstore.user("Bonjour"))
    engine.save()
    engine.set(ctxstore.user("pending question"))
    report = engine.inspect()
    json.dumps(report)  # JSON-serializable as it is
    estimate = report["estimate"]
    assert estimate["tokens"] == engine.token_count()
    assert sum(part["tokens"] for part in estimate["fragments"]) == estimate["tokens"]
    assert estimate["provider"] == "openai"
    assert estimate["context_limit"] == 128_000
    assert estimate["exceeded"] is False
    assert estimate["cost_usd"] == pytest.approx(estimate["tokens"] * 2.5e-06)
    names = [part["name"] for part in estimate["fragments"]]
    assert names[:2] == ["role", "hint"]
    assert "history" in names
    assert [p["kind"] for p in estimate["fragments"] if p["kind"] == "pending"] == ["pending"]
    assert "You are terse." in report["rendered"]
    assert len(report["fragments"]["context"]) == 2
    assert len(report["fragments"]["pending"]) == 1
    assert report["fragments"]["persisted"]["messages"] == 1
    assert len(report["graph"]["messages"]) == 1
    assert report["meta"]["chat_id"] == engine.chat_id
    assert report["meta"]["branch"] == "main"


def test_an_unknown_model_has_no_price_and_a_window_can_be_exceeded(make_engine: Any) -> None:
    engine = make_engine()
    engine.set(ctxstore.user("x"))
    unknown = engine.inspect(model="some-provider/unknown-model")
    assert unknown["estimate"]["cost_usd"] is None
    assert unknown["estimate"]["context_limit"] is None
    assert unknown["estimate"]["tokenizer"] == "estimate"
    engine.set(ctxstore.user("word " * 10_000))
    small = engine.inspect(model="gpt-4-0613")
    assert small["estimate"]["context_limit"] is not None
    assert small["estimate"]["exceeded"] is True


def test_prices_are_read_without_importing_litellm() -> None:
    code = (
        "import sys\n"
        "from ctxstore.window.model_info import model_info\n"
        "info = model_info('openai/gpt-4o')\n"
        "assert info is not None and info.max_input_tokens == 128000\n"
        "assert 'litellm' not in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
