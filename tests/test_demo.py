"""The README's first command: the demo runs offline and shows every branching feature."""

from __future__ import annotations

import re
import subprocess
import sys

from ctxstore.cli.demo import run_demo


def test_demo_shows_save_btw_rewind_restore_edit_and_the_tree() -> None:
    lines: list[str] = []
    run_demo(lines.append)
    text = "\n".join(lines)
    assert "[main] assistant: Day 1: Alfama" in text
    assert "[main-v2] user: Is it rainy in May?" in text  # btw branch
    assert "now on main-v3, which starts at the first answer" in text  # rewind
    assert "now on main-v3-v2" in text  # restore of the checkpoint
    assert "the edit landed on main-v3-v2-v2" in text
    tree = text.split("The chat as a tree")[1]
    assert "(checkpoints: after-plan)" in tree
    assert "[main-v3-v2-v2*]" in tree  # the edit's branch is active
    assert re.search(r"├── \S{8} user: Where should we eat\?", tree)
    assert tree.count("user: Plan a weekend in") == 2  # the original and the edited root


def test_demo_runs_from_the_command_line_without_a_server() -> None:
    env = {"PATH": "/usr/bin:/bin", "CTXSTORE_URL": "redis://127.0.0.1:1"}
    result = subprocess.run(
        [sys.executable, "-m", "ctxstore.cli", "demo"],
        capture_output=True,
        text=True,
        check=False,
        env=env,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "The chat as a tree" in result.stdout
