"""``ctxstore web``: the bind rule at the command line, and a real server (uvicorn) answering."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest

from ctxstore.cli.main import main


def test_a_public_address_without_a_token_refuses_to_start(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CTXSTORE_WEB_TOKEN", raising=False)
    assert main(["web", "--url", "memory://", "--host", "0.0.0.0"]) == 1
    assert "without a token" in capsys.readouterr().err


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def serving(*args: str, env: dict[str, str] | None = None) -> Iterator[str]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "ctxstore", "web", "--url", "memory://", "--port", str(port), *args],
        env={**os.environ, **(env or {})},
        stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                httpx.get(base + "/", timeout=1)
                break
            except httpx.TransportError:
                if process.poll() is not None or time.monotonic() > deadline:
                    told = process.stderr.read().decode() if process.stderr else ""
                    raise AssertionError(told) from None
                time.sleep(0.1)
        yield base
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_the_console_serves_with_its_token_from_the_environment() -> None:
    with serving("--host", "0.0.0.0", env={"CTXSTORE_WEB_TOKEN": "from-env"}) as base:
        assert httpx.get(base + "/n/-/").status_code == 401
        shown = httpx.get(base + "/n/-/", headers={"Authorization": "Bearer from-env"})
        assert shown.status_code == 200
        assert "<h1>Chats" in shown.text


def test_on_loopback_it_needs_no_token() -> None:
    with serving() as base:
        assert httpx.get(base + "/n/-/").status_code == 200
