"""Turns across OS processes on real servers: enqueued turns from several processes never
interleave, and a writer stopped past its lease (SIGSTOP, as a GC pause or a frozen VM would)
cannot write once another turn has taken the chat."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import ctxstore
from tests.support.turn_worker import TURNS

ROOT = Path(__file__).resolve().parents[2]
PROCESSES = 4

pytestmark = pytest.mark.slow


def worker(mode: str, url: str, namespace: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.support.turn_worker", mode, url, namespace, "c1"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def test_enqueued_turns_of_many_processes_never_interleave(
    server_backend: str, namespace: str
) -> None:
    store = ctxstore.connect(server_backend, namespace=namespace).admin()
    store.upsert_chat("c1", "alice")
    workers = [worker("turns", server_backend, namespace) for _ in range(PROCESSES)]
    for process in workers:
        _out, err = process.communicate(timeout=120)
        assert process.returncode == 0, err
    main = [m["message"]["content"] for m in store.load_branch("c1").messages]
    assert len(main) == 2 * PROCESSES * TURNS
    questions, answers = main[::2], main[1::2]
    assert all(q.startswith("q:") for q in questions)
    assert [q[2:] for q in questions] == [a[2:] for a in answers]  # each answer follows its own
    assert [b.name for b in store.list_branches("c1")] == ["main"]
    store.close()


def test_a_stopped_writer_cannot_write_after_its_lease_was_taken(
    server_backend: str, namespace: str
) -> None:
    store = ctxstore.connect(server_backend, namespace=namespace).admin()
    store.upsert_chat("c1", "alice")
    paused = worker("paused", server_backend, namespace)
    assert paused.stdout is not None
    assert paused.stdout.readline().strip() == "ready"
    os.kill(paused.pid, signal.SIGSTOP)
    try:
        time.sleep(0.8)  # past the paused turn's 0.5 s lease
        engine = ctxstore.ContextEngine(store=store, chat_id="c1", user_id="alice")
        with engine.turn("reject") as turn:  # granted: the lease expired
            assert not turn.interrupted
            engine.set(ctxstore.user("q2"), ctxstore.assistant("a2"))
            engine.save()
    finally:
        os.kill(paused.pid, signal.SIGCONT)
    out, err = paused.communicate(timeout=60)
    assert paused.returncode == 0, err
    lines = out.split()
    assert lines[0] == "lost"
    where = json.loads(out.splitlines()[-1])
    assert where["forked"]
    assert where["branch"] != "main"
    main = [m["message"]["content"] for m in store.load_branch("c1").messages]
    assert main == ["paused-q", "q2", "a2"]
    side = [m["message"]["content"] for m in store.load_branch("c1", where["branch"]).messages]
    assert side == ["paused-q", "paused-a"]
    store.close()
