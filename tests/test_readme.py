"""The README: its quickstart, its links to the documentation site, and the test command
``.ci/run`` reads from it (its examples run in tests/test_docs.py, with the site's)."""

from __future__ import annotations

import re
import subprocess

import yaml

from tests.support import pages

README = pages.README
CI_RUN = pages.ROOT / ".ci" / "run"


def test_readme_has_the_store_and_engine_examples() -> None:
    blocks = [block.code for block in pages.python_blocks(README)]
    assert any(".append(" in block and "for_user(" in block for block in blocks)
    assert any("engine.rewind(" in block and "litellm.completion" in block for block in blocks)


def test_readme_links_every_page_of_the_site() -> None:
    config = yaml.safe_load((pages.ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    listed = [page for entry in config["nav"] for page in entry.values()]
    assert sorted(listed) == sorted(path.name for path in pages.DOCS.glob("*.md"))
    linked = set(re.findall(r"\]\(docs/([^)#]+)", README.read_text(encoding="utf-8")))
    assert set(listed) <= linked, set(listed) - linked
    for page in linked:
        assert (pages.DOCS / page).exists(), page


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
