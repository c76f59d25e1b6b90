"""``ctxstore export CHAT --format jsonl [-o FILE]`` and ``ctxstore import FILE|-``, in process."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

import ctxstore
from tests.cli.conftest import Run
from tests.cli.test_cli import assert_one_line_error, seed_trip, store_args


def test_export_to_stdout_then_import_from_a_file_gives_the_same_chat(
    memory_url: str, namespace: str, run: Run, tmp_path: Path
) -> None:
    seed_trip(memory_url, namespace)
    args = store_args(memory_url, namespace)
    code, out, err = run(*args, "export", "trip", "--format", "jsonl")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert [json.loads(line)["type"] for line in lines] == (
        ["chat"] + ["message"] * 4 + ["branch"] * 2 + ["checkpoint"] * 2
    )
    path = tmp_path / "trip.jsonl"
    path.write_text(out, encoding="utf-8")
    code, out, err = run(*args, "import", str(path), "--chat-id", "copy")
    assert (code, err) == (0, "")
    assert (
        out == "imported chat copy of alice: 4 messages, 2 branches, 2 checkpoints, 0 summaries\n"
    )
    _, again, _ = run(*args, "export", "copy", "--format", "jsonl")
    assert again.splitlines()[1:] == lines[1:]
    assert json.loads(again.splitlines()[0]) == {**json.loads(lines[0]), "id": "copy"}


def test_export_to_a_file_and_import_from_stdin_under_another_owner(
    memory_url: str, namespace: str, run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed_trip(memory_url, namespace)
    args = store_args(memory_url, namespace)
    path = tmp_path / "out" / "trip.jsonl"
    path.parent.mkdir()
    assert run(*args, "export", "trip", "--format", "jsonl", "-o", str(path)) == (0, "", "")
    assert [item.name for item in path.parent.iterdir()] == ["trip.jsonl"]  # no temporary left
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(path.read_bytes())))
    code, out, _ = run(*store_args(memory_url, namespace + "b"), "import", "-", "--user", "bob")
    assert code == 0
    assert out.startswith("imported chat trip of bob: 4 messages")
    with ctxstore.connect(memory_url, namespace=namespace + "b").admin() as store:
        assert [chat.id for chat in store.list_chats(user_id="bob")] == ["trip"]


def test_a_drawing_format_can_go_to_a_file_too(
    memory_url: str, namespace: str, run: Run, tmp_path: Path
) -> None:
    seed_trip(memory_url, namespace)
    args = store_args(memory_url, namespace)
    path = tmp_path / "trip.mmd"
    assert run(*args, "export", "trip", "--format", "mermaid", "-o", str(path))[0] == 0
    assert path.read_text() == run(*args, "export", "trip", "--format", "mermaid")[1]


def test_a_failed_export_leaves_no_file(
    memory_url: str, namespace: str, run: Run, tmp_path: Path
) -> None:
    args = store_args(memory_url, namespace)
    path = tmp_path / "nope.jsonl"
    result = run(*args, "export", "nope", "--format", "jsonl", "-o", str(path))
    assert assert_one_line_error(*result, 1) == "chat 'nope' does not exist"
    assert list(tmp_path.iterdir()) == []
    seed_trip(memory_url, namespace)
    result = run(*args, "export", "trip", "--format", "jsonl", "-o", str(tmp_path / "x" / "y"))
    assert assert_one_line_error(*result, 1).startswith(f"cannot write {tmp_path / 'x' / 'y'}")


def test_import_errors_are_one_line_and_name_the_record(
    memory_url: str, namespace: str, run: Run, tmp_path: Path
) -> None:
    seed_trip(memory_url, namespace)
    args = store_args(memory_url, namespace)
    exported = run(*args, "export", "trip", "--format", "jsonl")[1].splitlines()
    path = tmp_path / "trip.jsonl"

    def attempt(lines: list[str], *extra: str) -> str:
        path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        return assert_one_line_error(*run(*args, "import", str(path), *extra), 1)

    assert attempt(exported) == (
        "chat 'trip' exists already: import under another id, or delete it first; "
        "nothing was imported"
    )
    broken = [*exported[:3], "{oops", *exported[3:]]
    assert attempt(broken, "--chat-id", "x").startswith("record 4 is not a JSON object")
    assert "record 3 (message) parent_id" in attempt(
        [exported[0], exported[1], exported[3]], "--chat-id", "x"
    )
    assert "incomplete" in attempt(exported[:-1], "--chat-id", "x")
    missing = run(*args, "import", str(tmp_path / "absent.jsonl"))
    assert "cannot read" in assert_one_line_error(*missing, 1)
    with ctxstore.connect(memory_url, namespace=namespace).admin() as store:
        assert [chat.id for chat in store.list_chats()] == ["trip"]


def test_the_jsonl_format_is_a_choice_and_json_stays_the_drawing_graph(
    memory_url: str, namespace: str, run: Run
) -> None:
    seed_trip(memory_url, namespace)
    out = run(*store_args(memory_url, namespace), "export", "trip", "--format", "json")[1]
    graph = json.loads(out)
    assert set(graph) == {"chat", "messages", "branches", "checkpoints"}
    assert "preview" in graph["messages"][0]
