"""Fixtures of the command-line tests: a named embedded store and ``main`` run in process."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest

from ctxstore.cli.main import main

Run = Callable[..., tuple[int, str, str]]


@pytest.fixture
def memory_url() -> str:
    """A named embedded store: what the test writes, the CLI (same process) reads."""
    return f"memory://{uuid.uuid4().hex}"


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str]) -> Run:
    """``main(argv)`` with its exit code, stdout and stderr."""

    def invoke(*argv: str) -> tuple[int, str, str]:
        code = main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    return invoke
