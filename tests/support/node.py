"""The AI SDK itself (the ``ai`` package from the npm registry, pinned in tests/node), run by
Node for the tests that compare ctxstore with the real client.

``.ci/run`` installs it (``npm ci`` in tests/node); a developer's first run installs it here.
Without Node the tests skip, except under ``CI=true``, where a missing Node fails the run.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

NODE_DIR = Path(__file__).resolve().parent.parent / "node"


def node_or_skip() -> str:
    """The ``node`` binary, with the pinned packages installed."""
    node = shutil.which("node")
    npm = shutil.which("npm")
    if node is None or npm is None:
        message = "Node.js and npm are needed for the AI SDK tests"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message + " (CI=true)")
        pytest.skip(message)
    if not (NODE_DIR / "node_modules" / "ai" / "package.json").exists():
        subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=NODE_DIR,
            check=True,
            timeout=300,
        )
    return node


def run_sdk(command: str, cases: list[Any], *, timeout: float = 120) -> list[dict[str, Any]]:
    """The SDK's answers (tests/node/sdk.mjs) for a batch of cases."""
    node = node_or_skip()
    done = subprocess.run(
        [node, str(NODE_DIR / "sdk.mjs")],
        input=json.dumps({"command": command, "cases": cases}),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        raise AssertionError(f"sdk.mjs failed: {done.stderr[-2000:]}")
    answers: list[dict[str, Any]] = json.loads(done.stdout)
    return answers


def sdk_read(events: str) -> dict[str, Any]:
    """The AI SDK client's reading of server-sent events (tests/node/read_stream.mjs): the
    last UIMessage it built, the chunk types, the transient data chunks, and its errors
    (a chunk its schema refuses is one)."""
    node = node_or_skip()
    done = subprocess.run(
        [node, str(NODE_DIR / "read_stream.mjs")],
        input=events,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if done.returncode != 0:
        raise AssertionError(f"read_stream.mjs failed: {done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result
