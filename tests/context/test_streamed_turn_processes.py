"""A reader in another process follows an answer while it is streamed, loses its connection
midway, resumes with ``after=`` and gets every piece exactly once, in order. The writer waits
for the reader at two chunks (after it joined, after it resumed), so both happen while the
answer is still being written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import ctxstore
from tests.support.streams import ModelStreams, consume, read_pieces

ROOT = Path(__file__).resolve().parents[2]
ANSWER = (
    "Day one: the Alfama, the castle and a tram ride to Graca. Day two: Belem, the tower, "
    "pasteis de nata and the river at dusk."
)

pytestmark = pytest.mark.slow


def reader(shell: str, url: str, namespace: str, stream_id: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.support.stream_reader",
            shell,
            url,
            namespace,
            "c1",
            stream_id,
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


@pytest.mark.parametrize("shell", ["sync", "async"])
def test_a_reader_in_another_process_resumes_midway_and_gets_every_piece_once_in_order(
    server_backend: str, namespace: str, monkeypatch: pytest.MonkeyPatch, shell: str
) -> None:
    store = ctxstore.connect(server_backend, namespace=namespace).admin()
    engine = ctxstore.ContextEngine(store=store, chat_id="c1", user_id="alice")
    streams = ModelStreams().install(monkeypatch)
    streams.delay = 0.025  # the answer takes about a second, written in many pieces
    engine.set(ctxstore.user("Plan a weekend in Lisbon."))
    turn = engine.stream_turn("gpt-4o-mini", mock_response=ANSWER, title=False)
    process = reader(shell, server_backend, namespace, turn.stream_id)
    heard: list[str] = []

    def wait_for_reader(index: int) -> None:
        expected = {6: "joined", 14: "resumed"}.get(index)
        if expected is not None:
            line = process.stdout.readline().strip()  # type: ignore[union-attr]
            heard.append(line)
            assert line == expected, process.stderr.read()  # type: ignore[union-attr]

    streams.on_chunk = wait_for_reader
    assert consume(turn, engine) == ANSWER
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert heard == ["joined", "resumed"]
    read: dict[str, list[Any]] = json.loads(out.strip().splitlines()[-1])
    before, after = read["before"], read["after"]
    assert len(before) == 2
    assert len(after) > 1
    pieces = [(piece_id, text) for piece_id, text in before + after]
    assert "".join(text for _id, text in pieces) == ANSWER
    ids = [piece_id for piece_id, _text in pieces]
    assert len(set(ids)) == len(ids)
    assert ids == sorted(ids, key=lambda entry: tuple(int(part) for part in entry.split("-")))
    late = read_pieces(store, "c1", turn.stream_id)
    assert [(piece.id, piece.text) for piece in late] == pieces
    store.close()
