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


def run_script(script: str, stdin: str, *, timeout: float = 120) -> Any:
    """What a script of tests/node prints (JSON) for ``stdin``; its stderr on a failure."""
    node = node_or_skip()
    done = subprocess.run(
        [node, str(NODE_DIR / script)],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        raise AssertionError(f"{script} failed: {done.stderr[-3000:]}")
    return json.loads(done.stdout)


def run_sdk(command: str, cases: list[Any], *, timeout: float = 120) -> list[dict[str, Any]]:
    """The SDK's answers (tests/node/sdk.mjs) for a batch of cases."""
    answers: list[dict[str, Any]] = run_script(
        "sdk.mjs", json.dumps({"command": command, "cases": cases}), timeout=timeout
    )
    return answers


def sdk_read(events: str) -> dict[str, Any]:
    """The AI SDK client's reading of server-sent events (tests/node/read_stream.mjs): the
    last UIMessage it built, the chunk types, the transient data chunks, and its errors
    (a chunk its schema refuses is one)."""
    result: dict[str, Any] = run_script("read_stream.mjs", events, timeout=60)
    return result
