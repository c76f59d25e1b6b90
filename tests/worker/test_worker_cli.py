"""``ctxstore worker`` on the command line, and a worker whose summaries a litellm model
writes (litellm's mock_response: no network)."""

from __future__ import annotations

import json
from typing import Any

import pytest

import ctxstore
from ctxstore.cli.main import main
from ctxstore.models import CompactionTrigger
from ctxstore.worker import Worker
from tests.worker.support import grow


def grow_at(url: str, namespace: str | None, chat: str, count: int) -> None:
    store = ctxstore.connect(url, namespace=namespace).admin()
    grow(
        store,
        chat,
        count,
        CompactionTrigger(soft_tokens=1, min_recent_messages=2),
        text="message {i}",
    )
    store.close()


def test_a_summary_model_writes_the_summary(server_backend: str, namespace: str) -> None:
    grow_at(server_backend, namespace, "m1", 6)
    worker = Worker(
        server_backend,
        namespaces=[namespace],
        summary_model="gpt-4o-mini",
        summarizer_options={"mock_response": "Six messages, counted."},
        poll_ms=20,
    )
    assert worker.run(burst=True).summarized == 1
    store = ctxstore.connect(server_backend, namespace=namespace).admin()
    summary = store.load_branch("m1", after_summary=True).summary
    assert summary is not None
    assert summary["content"] == "Six messages, counted."
    assert summary["metadata"]["model"] == "gpt-4o-mini"
    store.close()


def test_check_burst_and_dead_letters_from_the_command_line(
    server_backend: str, namespace: str, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = ["--url", server_backend]
    assert main([*url, "worker", "--namespace", namespace, "--check"]) == 1
    grow_at(server_backend, namespace, "d1", 4)
    # A summary model no one can reach: every attempt fails, the job ends as a dead letter.
    monkeypatch.setenv("CTXSTORE_SUMMARY_MODEL", "gpt-4o-mini")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-invalid")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    code = main([*url, "worker", "--namespace", namespace, "--burst", "--max-attempts", "1"])
    assert code == 0
    assert main([*url, "worker", "--namespace", namespace, "--check"]) == 1  # it left
    capsys.readouterr()
    assert main([*url, "worker", "--namespace", namespace, "--dead-letters"]) == 0
    letters = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [letter["chat"] for letter in letters] == ["d1"]
    assert letters[0]["namespace"] == namespace


def test_a_worker_without_a_summarizer_is_a_usage_error(capsys: Any) -> None:
    assert main(["--url", "memory://cli-worker", "worker", "--burst"]) == 1
    assert "summarizer" in capsys.readouterr().err
