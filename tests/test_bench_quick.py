"""The benchmark suite runs end to end (``bench/run.py --smoke``) and writes complete JSON.

This guards the benchmark against rotting while the store changes: every scenario must still
run through the public API and land in the JSON. It asserts no timing at all; figures from a
smoke run on a test machine mean nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.servers import require_server

ROOT = Path(__file__).resolve().parents[1]

#: Every scenario the JSON must hold (cluster and peers hold their skip reason in a smoke run).
SCENARIOS = {
    "save",
    "cold_read",
    "warm_read",
    "longest_call",
    "writers",
    "memory_per_message",
    "import_time",
    "first_save",
    "cluster",
    "embedded",
    "peers",
}


@pytest.mark.slow
def test_smoke_run_writes_every_scenario(tmp_path: Path) -> None:
    require_server()
    out = tmp_path / "results.json"
    markdown = tmp_path / "report.md"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "run.py"),
            "--smoke",
            "--json",
            str(out),
            "--markdown",
            str(markdown),
            "--plots",
            str(tmp_path / "plots"),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert done.returncode == 0, done.stderr[-4000:]
    data = json.loads(out.read_text(encoding="utf-8"))
    assert set(data["scenarios"]) >= SCENARIOS
    for name in ("save", "cold_read", "warm_read"):
        rows = data["scenarios"][name]
        assert rows, name
        for row in rows:
            assert {"median_us", "p90_us", "p99_us"} <= set(row["call"])
            assert row["ratio_floor"] in row["floors"]
            assert "ratio" in row
    writers = data["scenarios"]["writers"]
    assert writers["configurations"]
    for item in writers["configurations"]:
        assert item["integrity"]["lost"] == 0
        assert item["integrity"]["duplicated"] == 0
        assert item["integrity"]["orphaned"] == 0
    environment = data["environment"]
    for key in ("cpu_count", "versions", "load_average_start", "load_average_end", "git_commit"):
        assert key in environment
    assert markdown.read_text(encoding="utf-8").startswith("# ctxstore benchmark report")
    assert "Save 1 message" in done.stdout
