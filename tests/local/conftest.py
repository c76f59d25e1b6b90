"""Fixtures of the ``local://`` tests: a store directory whose server is stopped afterwards, and
Python snippets run in processes of their own (the store is shared between processes)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from ctxstore.errors import ConfigurationError
from ctxstore.store.local import LocalServer, place_of
from ctxstore.store.local.binary import server_binary


def require_local_binary() -> str:
    """The server binary ``local://`` starts; skips without one, fails under ``CI=true``."""
    try:
        return server_binary()
    except ConfigurationError as error:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{error}; CI=true requires the local:// tests to run")
        pytest.skip(str(error))


@pytest.fixture
def local_dir(tmp_path: Path) -> Iterator[Path]:
    """A fresh store directory; whatever server a test started in it is stopped afterwards."""
    require_local_binary()
    directory = tmp_path / "ctxdata"
    yield directory
    if directory.is_dir():
        LocalServer(place_of(str(directory), create=False)).stop()


def run_python(code: str, *, env: dict[str, str] | None = None, timeout: float = 60) -> str:
    """Run ``code`` in a new interpreter; its stdout (a failure shows its stderr)."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def starts_logged(directory: Path) -> int:
    """How many times a server started in ``directory`` (its log says so once per start)."""
    log = directory / "server.log"
    if not log.exists():
        return 0
    text = log.read_text(errors="replace")
    return text.count("Valkey is starting") + text.count("Redis is starting")
