"""The README's first command: the demo runs offline and shows every branching feature."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

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


def test_the_readmes_second_run_keeps_the_chat_across_processes(tmp_path: Path) -> None:
    """The README's local:// run, command by command, each ctxstore command in a process of its
    own (the install step aside): the second process draws the chat the first one wrote."""
    from tests.local.conftest import require_local_binary

    require_local_binary()
    readme = (Path(__file__).parents[1] / "README.md").read_text()
    block = readme.split("<!-- local-demo-command -->")[1].split("<!-- /local-demo-command -->")[0]
    runs = [shlex.split(args) for args in re.findall(r"\.venv/bin/ctxstore ([^\\&\n]+)", block)]
    assert runs == [
        ["--url", "local://./ctxdata", "demo"],
        ["--url", "local://./ctxdata", "tree", "lisbon-trip"],
    ]
    outputs = []
    try:
        for args in [*runs, runs[0]]:
            done = subprocess.run(
                [sys.executable, "-m", "ctxstore.cli", *args],
                capture_output=True,
                text=True,
                check=False,
                cwd=tmp_path,
                timeout=60,
            )
            assert done.returncode == 0, done.stderr
            outputs.append(done.stdout)
    finally:
        subprocess.run(
            [sys.executable, "-m", "ctxstore.cli", "local", "stop", "./ctxdata"],
            cwd=tmp_path,
            check=False,
            timeout=60,
        )
    assert "saved as 'lisbon-trip' in local://./ctxdata" in outputs[0]
    drawn = outputs[0].split("saved as 'lisbon-trip' in local://./ctxdata:\n")[1]
    assert outputs[1] == drawn  # a new process draws the same tree
    assert "(checkpoints: after-plan)" in outputs[1]
    assert "saved as 'lisbon-trip-2'" in outputs[2]  # a second run leaves the first chat alone
