"""The README's examples run as written (the model call answers offline with mock_response)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support import servers

README = Path(__file__).resolve().parents[1] / "README.md"
CI_RUN = Path(__file__).resolve().parents[1] / ".ci" / "run"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), re.DOTALL)


def test_readme_has_the_store_and_engine_examples() -> None:
    blocks = python_blocks()
    assert any("store.append(" in block for block in blocks)
    assert any("engine.rewind(" in block and "litellm.completion" in block for block in blocks)


@pytest.mark.parametrize("index", range(len(python_blocks())))
def test_readme_example_runs(
    index: int,
    redis_server: servers.RedisProcess,
    monkeypatch: pytest.MonkeyPatch,
    namespace: str,
) -> None:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    original = litellm.completion
    original_async = litellm.acompletion

    def offline(*args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("mock_response", "A short answer.")
        return original(*args, **kwargs)

    async def offline_async(*args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("mock_response", "A short answer.")
        return await original_async(*args, **kwargs)

    monkeypatch.setattr(litellm, "completion", offline)
    monkeypatch.setattr(litellm, "acompletion", offline_async)
    monkeypatch.delenv("CTXSTORE_URL", raising=False)
    code = python_blocks()[index].replace("redis://localhost:6379", redis_server.url)
    code = code.replace('namespace="acme"', f'namespace="{namespace}"')
    exec(compile(code, f"README.md block {index}", "exec"), {})


def test_ci_runs_the_readmes_test_command() -> None:
    """.ci/run reads the command from the README, so the two cannot drift apart."""
    script = CI_RUN.read_text()
    assert "test-command" in script
    assert "CI=true" in script
    extracted = subprocess.run(
        [
            "bash",
            "-c",
            "sed -n '/<!-- test-command -->/,/<!-- \\/test-command -->/p' README.md"
            " | grep -v '^<!--' | grep -v '^```'",
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=README.parent,
    ).stdout.strip()
    assert extracted.startswith("python3 -m venv")
    assert "pip install" in extracted
    assert "[test]" in extracted
    assert "pytest" in extracted
