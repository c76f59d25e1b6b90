"""A worker pod's own probes: ``--live`` passes while this machine's worker turns its loop
(no Redis call), ``--ready`` while Redis answers; a Redis outage fails readiness, never
liveness, and the worker goes on once Redis is back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import ctxstore
from ctxstore.cli.main import main
from ctxstore.models import CompactionTrigger
from ctxstore.worker import Worker, check_live, worker_ready
from ctxstore.worker.liveness import LivenessFile
from tests.support import servers
from tests.support.counting import letters
from tests.worker.support import grow, running


def live(path: Path) -> int:
    return main(["worker", "--live", "--live-file", str(path)])


def test_live_passes_while_the_worker_turns_and_fails_once_it_stopped(
    server_backend: str, namespace: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "worker.live"
    assert live(path) == 1
    assert "not started, or stopped" in capsys.readouterr().err
    worker = Worker(
        server_backend, namespaces=[namespace], compactify=lambda _messages: "s", poll_ms=20,
        live_file=path,
    )  # fmt: skip
    with running(worker, until=path.exists):
        turned = path.stat().st_mtime
        time.sleep(0.6)
        assert path.stat().st_mtime > turned  # the loop keeps moving it on
        assert live(path) == 0
        assert json.loads(path.read_text())["pid"] == os.getpid()
    assert not path.exists()
    assert live(path) == 1


def test_a_loop_that_stopped_turning_or_a_process_gone_is_not_live(tmp_path: Path) -> None:
    path = tmp_path / "worker.live"
    LivenessFile(path, 1000).start()
    assert check_live(path).live
    later = time.time() + 3.5  # three intervals and a half without a turn
    stale = check_live(path, now=later)
    assert not stale.live
    assert "last turned 3.5 s ago (limit 3.0 s)" in stale.reason
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    path.write_text(json.dumps({"pid": int(gone.stdout), "interval_ms": 1000}))
    assert "is gone" in check_live(path).reason
    path.write_text("not json")
    assert "is not a worker's liveness file" in check_live(path).reason


def test_a_redis_outage_fails_readiness_not_liveness_and_the_worker_goes_on(
    tmp_path: Path, namespace: str
) -> None:
    server = servers.start_redis(tmp_path / "redis")
    url, port = server.url, server.port
    store = ctxstore.connect(url, namespace=namespace, estimate_tokens=letters).admin()
    grow(store, "before", 6, CompactionTrigger(soft_tokens=1, min_recent_messages=2))
    path = tmp_path / "worker.live"
    worker = Worker(
        url, namespaces=[namespace], compactify=lambda _messages: "sum", poll_ms=50,
        estimate_tokens=letters, live_file=path,
    )  # fmt: skip
    try:
        with running(worker, until=lambda: worker.stats.summarized >= 1):
            assert worker_ready(url, namespaces=[namespace])[0]
            server.stop()
            deadline = time.monotonic() + 4  # longer than the 3-interval limit
            while time.monotonic() < deadline:
                assert check_live(path).live, check_live(path).reason
                time.sleep(0.1)
            ready, reason = worker_ready(url, namespaces=[namespace], timeout=0.5)
            assert not ready
            assert namespace in reason
            server = servers.start_redis_on(tmp_path / "redis", port)
            grow(store, "after", 6, CompactionTrigger(soft_tokens=1, min_recent_messages=2))
            deadline = time.monotonic() + 30
            while worker.stats.summarized < 2:
                assert time.monotonic() < deadline, "the worker did not go on after the outage"
                time.sleep(0.05)
            assert worker_ready(url, namespaces=[namespace])[0]
    finally:
        store.close()
        server.stop()


def test_ready_exits_0_when_redis_answers_and_1_with_the_reason_when_not(
    redis_server: servers.RedisProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["worker", "--ready", "--url", redis_server.url]) == 0
    assert main(["worker", "--ready", "--url", "redis://127.0.0.1:1"]) == 1
    assert "not ready: namespace None" in capsys.readouterr().err


def test_live_asks_no_redis(tmp_path: Path) -> None:
    """The probe reads the file only: with no Redis to reach it still says live."""
    path = tmp_path / "worker.live"
    LivenessFile(path, 1000).start()
    assert main(["--url", "redis://127.0.0.1:1", "worker", "--live", "--live-file", str(path)]) == 0
