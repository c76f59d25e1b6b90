"""The OpenTelemetry cases (``otel_cases.py``) run in a process of their own: OpenTelemetry's
tracer and meter providers can be set once a process, and another suite's test (an SDK that
sets its own) or these cases' providers must not leak into the rest of the run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_opentelemetry_cases_pass_in_a_fresh_process() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-p", "no:randomly",
         "-p", "no:cacheprovider", str(Path(__file__).with_name("otel_cases.py"))],
        check=False, cwd=ROOT, capture_output=True, text=True, timeout=600,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert " passed" in done.stdout
