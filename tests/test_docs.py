"""Every Python example of the README and of the documentation site runs as written, and the
site builds with no warning.

Each ``python`` block runs on its own, in a fresh namespace: the model calls answer offline
(litellm's ``mock_response``), ``redis://localhost:6379`` stands for the test session's server,
``namespace="acme"`` for a namespace of the test's own, and each ``memory://<name>`` for a name of
the test's own. A block that must not run (a shell command, a usage line, a file layout) is
fenced ``bash`` or ``text``. Test ids name the page and the example's rank on it, from 1:
``docs/engine.md:3`` is the third Python block of that page.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ctxstore.store.local import LocalServer, place_of
from tests.support import pages, servers

EXAMPLES = [
    pytest.param(block, id=f"{block.page}:{rank}")
    for path in pages.pages()
    for rank, block in enumerate(pages.python_blocks(path), start=1)
]

REDIS_URL = "redis://localhost:6379"
MEMORY_NAME = re.compile(r"memory://([A-Za-z0-9_.-]+)")


def test_every_fence_names_a_known_language() -> None:
    """A Python example fenced ``py`` (or with no language) would silently never run."""
    for path in pages.pages():
        for block in pages.blocks(path):
            assert block.language in pages.LANGUAGES, f"{block.page}:{block.line - 1}"
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            assert not re.match(r"\s+```", line), f"{path.name}:{number}: an indented fence"


def test_examples_on_redis_use_a_namespace_of_their_own() -> None:
    """Examples on the test server are fenced off from each other by ``namespace="acme"``."""
    for parameter in EXAMPLES:
        (block,) = parameter.values
        if REDIS_URL in block.code:
            assert 'namespace="acme"' in block.code, parameter.id


@pytest.mark.parametrize("block", EXAMPLES)
def test_example_runs(
    block: pages.Block,
    redis_server: servers.RedisProcess,
    monkeypatch: pytest.MonkeyPatch,
    namespace: str,
    tmp_path: Path,
) -> None:
    """Each example runs in a folder of its own: a local:// example's directory lands there,
    and its server is stopped afterwards."""
    monkeypatch.chdir(tmp_path)
    try:
        _run_example(block, redis_server, monkeypatch, namespace)
    finally:
        for lock in tmp_path.glob("**/server.lock"):
            LocalServer(place_of(str(lock.parent), create=False)).stop()


def _run_example(
    block: pages.Block,
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
    code = block.code.replace(REDIS_URL, redis_server.url)
    code = code.replace('namespace="acme"', f'namespace="{namespace}"')
    code = MEMORY_NAME.sub(lambda match: f"memory://{match.group(1)}-{namespace}", code)
    # Blank lines in front, so a traceback names the line of the page.
    source = "\n" * (block.line - 1) + code
    exec(compile(source, block.page, "exec"), {})


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    """A broken link, a missing anchor or a page left out of the nav fails the build."""
    site = tmp_path / "site"
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "-f",
            str(pages.ROOT / "mkdocs.yml"),
            "-d",
            str(site),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    assert "WARNING" not in built.stderr, built.stderr
    for page in pages.DOCS.glob("*.md"):
        assert (site / page.stem / "index.html").exists() or page.stem == "index", page.name
    # Read offline: no script, stylesheet or image comes from another host.
    remote = re.compile(r'<(?:script|link|img)\b[^>]*\b(?:src|href)="((?:https?:)?//[^"]*)')
    for html in site.rglob("*.html"):
        fetched = remote.findall(html.read_text(encoding="utf-8"))
        assert not fetched, (html.relative_to(site), fetched)
