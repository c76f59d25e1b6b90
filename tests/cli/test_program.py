"""The command line as a program: ``python -m ctxstore``, ``--version``, the note about the
embedded store, and a reader that closes the pipe early (``| head -1``)."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

import ctxstore
from ctxstore.cli.main import MEMORY_NOTE
from tests.cli.conftest import Run
from tests.support import servers


def program(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m ctxstore ARGV`` without CTXSTORE_URL (unless ``env`` sets it)."""
    environment = {key: value for key, value in os.environ.items() if key != "CTXSTORE_URL"}
    environment.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "ctxstore", *argv],
        capture_output=True,
        text=True,
        env=environment,
        timeout=120,
        check=False,
    )


def test_version_in_process_and_as_a_program(run: Run) -> None:
    expected = f"ctxstore {ctxstore.__version__}\n"
    assert run("--version") == (0, expected, "")
    result = program("--version")
    assert (result.returncode, result.stdout, result.stderr) == (0, expected, "")


def test_python_dash_m_ctxstore_runs_the_command_line() -> None:
    result = program("--url", "memory://", "chats")
    assert (result.returncode, result.stdout, result.stderr) == (
        0,
        "no chats\n",
        MEMORY_NOTE + "\n",
    )


def test_the_program_notes_an_empty_embedded_store_on_stderr() -> None:
    result = program("chats", env={"CTXSTORE_URL": "memory://"})
    assert (result.returncode, result.stdout) == (0, "no chats\n")
    assert result.stderr == MEMORY_NOTE + "\n"
    unnamed = program("chats")
    assert unnamed.returncode == 1
    assert unnamed.stderr.startswith("ctxstore: no store URL")


@pytest.fixture(scope="module")
def long_chat(redis_server: servers.RedisProcess) -> tuple[str, str]:
    """A chat whose log and export are far longer than a pipe's buffer (64 KiB)."""
    namespace = f"pipe{uuid.uuid4().hex[:8]}"
    with ctxstore.connect(
        redis_server.url, namespace=namespace, estimate_tokens=len
    ).admin() as store:
        store.upsert_chat("long", "alice")
        batch = [{"role": "user", "content": f"line {index} " + "x" * 100} for index in range(3000)]
        store.append("long", "main", batch, expected_head=None)
    return redis_server.url, namespace


@pytest.mark.parametrize(
    "command", [["log", "long"], ["export", "long", "--format", "jsonl"], ["tree", "long"]]
)
def test_a_reader_that_stops_early_ends_the_command_quietly(
    long_chat: tuple[str, str], tmp_path: Path, command: list[str]
) -> None:
    url, namespace = long_chat
    errors = tmp_path / "stderr.txt"
    ctx = shlex.join(
        [sys.executable, "-m", "ctxstore", "--url", url, "--namespace", namespace, *command]
    )
    script = f"{ctx} 2>{shlex.quote(str(errors))} | head -1; exit ${{PIPESTATUS[0]}}"
    result = subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.stdout.count("\n") == 1
    assert errors.read_text() == ""  # no traceback, no "Exception ignored"
    assert result.returncode == 141
