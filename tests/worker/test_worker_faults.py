"""The worker under faults: SIGKILLed mid-job (another worker takes the job over and finishes
it), and eight processes appending while the chat is being summarized (nothing is lost)."""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import ctxstore
from ctxstore.models import CompactionTrigger
from ctxstore.worker import Worker
from tests.support.counting import letters
from tests.worker.support import grow

SPAWN = multiprocessing.get_context("spawn")


STUCK_WORKER = textwrap.dedent(
    """
    import tests  # in the encrypted pass, its key provider (tests/support/encrypted_pass.py)
    import sys, time
    from pathlib import Path
    from ctxstore.worker import Worker

    def stuck(messages):
        Path(sys.argv[3]).write_text("summarizing")
        time.sleep(600)
        return "never"

    Worker(sys.argv[1], namespaces=[sys.argv[2]], compactify=stuck, poll_ms=20,
           estimate_tokens=len).run()
    """
)


@contextmanager
def worker_in_job(script: str, url: str, namespace: str, flag: Path) -> Iterator[Any]:
    """A worker process running ``script``, yielded once it has started a job (it writes
    ``flag``); killed on the way out if it is still alive."""
    process = subprocess.Popen(
        [sys.executable, "-c", script, url, namespace, str(flag)],
        cwd=Path(__file__).resolve().parents[2],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while not flag.exists():
            assert time.monotonic() < deadline, "the worker never started the job"
            assert process.poll() is None, "the worker exited"
            time.sleep(0.02)
        yield process
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_a_job_of_a_killed_worker_is_finished_by_another(
    server_backend: str, namespace: str, tmp_path: Any
) -> None:
    store = ctxstore.connect(server_backend, namespace=namespace, estimate_tokens=letters).admin()
    grow(store, "k1", 8, CompactionTrigger(soft_tokens=1, min_recent_messages=2))
    flag = tmp_path / "started"
    with worker_in_job(STUCK_WORKER, server_backend, namespace, flag) as process:
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
    # The dead worker's lease must expire and its job must idle before another takes it over:
    # short settings here, minutes in production.
    store.client.hdel(store.state.keyspace.chat("k1").key("chat"), "clease")
    rescuer = Worker(
        server_backend,
        namespaces=[namespace],
        compactify=lambda messages: f"{len(messages)} messages",
        claim_idle_ms=50,
        poll_ms=20,
        estimate_tokens=letters,
    )
    time.sleep(0.1)
    stats = rescuer.run(burst=True)
    assert stats.summarized == 1
    summary = store.load_branch("k1", after_summary=True).summary
    assert summary is not None
    assert summary["content"] == "6 messages"
    store.close()


def _append_many(url: str, namespace: str, writer: int, count: int) -> list[str]:
    store = ctxstore.connect(url, namespace=namespace, estimate_tokens=len).admin()
    written = []
    for index in range(count):
        text = f"w{writer}-{index}"
        store.append(
            "busy",
            "main",
            [{"role": "user", "content": text}],
            expected_head=None,
            on_conflict="rebase",
        )
        written.append(text)
    store.close()
    return written


def test_appends_during_summarization_are_all_kept(server_backend: str, namespace: str) -> None:
    store = ctxstore.connect(server_backend, namespace=namespace, estimate_tokens=letters).admin()
    grow(store, "busy", 20, CompactionTrigger(soft_tokens=1, min_recent_messages=2))
    with SPAWN.Pool(8) as pool:
        pending = pool.starmap_async(
            _append_many, [(server_backend, namespace, writer, 40) for writer in range(8)]
        )

        def slow(messages: list[dict[str, Any]]) -> str:
            time.sleep(0.2)  # the writers keep appending meanwhile
            return f"{len(messages)} early messages"

        stats = Worker(
            server_backend,
            namespaces=[namespace],
            compactify=slow,
            poll_ms=20,
            estimate_tokens=letters,
        ).run(burst=True)
        written = [text for batch in pending.get(timeout=120) for text in batch]
    assert stats.summarized == 1
    full = [m["message"]["content"] for m in store.load_branch("busy").messages]
    assert len(full) == 20 + 8 * 40
    assert sorted(full[20:]) == sorted(written)
    after = store.load_branch("busy", after_summary=True)
    assert after.summary is not None
    covered = after.summary["metadata"]["covered"]
    assert covered >= 18
    assert [m["message"]["content"] for m in after.messages] == full[covered:]
    assert store.verify_chat("busy").ok
    store.close()


SLOW_WORKER = textwrap.dedent(
    """
    import tests  # in the encrypted pass, its key provider (tests/support/encrypted_pass.py)
    import sys, time
    from pathlib import Path
    from ctxstore.worker import Worker

    def slow(messages):
        Path(sys.argv[3]).write_text("summarizing")
        time.sleep(1.0)
        return "finished after the signal"

    stats = Worker(sys.argv[1], namespaces=[sys.argv[2]], compactify=slow, poll_ms=20,
                   estimate_tokens=len).run()
    print("summarized", stats.summarized)
    """
)


def test_sigterm_finishes_the_job_in_hand_then_exits(
    server_backend: str, namespace: str, tmp_path: Any
) -> None:
    store = ctxstore.connect(server_backend, namespace=namespace, estimate_tokens=letters).admin()
    grow(store, "t1", 6, CompactionTrigger(soft_tokens=1, min_recent_messages=2))
    flag = tmp_path / "started"
    with worker_in_job(SLOW_WORKER, server_backend, namespace, flag) as process:
        process.send_signal(signal.SIGTERM)
        out, _err = process.communicate(timeout=30)
    assert process.returncode == 0
    assert "summarized 1" in out
    summary = store.load_branch("t1", after_summary=True).summary
    assert summary is not None
    assert summary["content"] == "finished after the signal"
    store.close()


def test_a_second_sigterm_exits_at_once(server_backend: str, namespace: str, tmp_path: Any) -> None:
    store = ctxstore.connect(server_backend, namespace=namespace, estimate_tokens=letters).admin()
    grow(store, "t2", 6, CompactionTrigger(soft_tokens=1, min_recent_messages=2))
    store.close()
    flag = tmp_path / "started"
    with worker_in_job(STUCK_WORKER, server_backend, namespace, flag) as process:
        process.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        assert process.poll() is None  # the first signal waits for the job in hand
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=10)  # the stuck summarizer would take 600 s
    assert process.returncode != 0
