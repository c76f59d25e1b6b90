"""``ctxstore erase-user`` and ``ctxstore export-user``: a user's data, all of it."""

from __future__ import annotations

import io
import json
import sys

import pytest

import ctxstore
from ctxstore.cli.lifecycle import receipt_text
from ctxstore.cli.main import main
from ctxstore.models import ErasureReceipt
from tests.cli.conftest import Run
from tests.cli.test_cli import assert_one_line_error, seed_trip, store_args
from tests.cli.test_commands import Terminal, exists


def seed_bob(url: str, namespace: str) -> None:
    with ctxstore.connect(url, namespace=namespace).admin() as store:
        store.upsert_chat("bobs", "bob")
        store.append("bobs", None, [{"role": "user", "content": "hi"}], expected_head=None)


def test_erase_user_with_yes_erases_and_prints_the_receipt(
    memory_url: str, namespace: str, run: Run
) -> None:
    seed_trip(memory_url, namespace)
    seed_bob(memory_url, namespace)
    code, out, err = run(*store_args(memory_url, namespace), "erase-user", "alice", "--yes")
    assert (code, err) == (0, "")
    assert out.startswith("erased user alice: 1 chat, ")
    assert "  messages: 4\n" in out
    assert "not reachable from here:\n  - " in out
    assert not exists(memory_url, namespace, "trip")
    assert exists(memory_url, namespace, "bobs")
    again = run(*store_args(memory_url, namespace), "erase-user", "alice", "--yes")
    assert again[0] == 0
    assert again[1].startswith("erased user alice: 0 chats, 0 keys and entries removed")


def test_erase_user_json_is_the_receipt(memory_url: str, namespace: str, run: Run) -> None:
    seed_trip(memory_url, namespace)
    code, out, _err = run(
        *store_args(memory_url, namespace), "erase-user", "alice", "--yes", "--json"
    )
    assert code == 0
    receipt = json.loads(out)
    assert receipt["user_id"] == "alice"
    assert receipt["chat_ids"] == ["trip"]
    assert receipt["removed"]["chats"] == 1
    assert receipt["unreachable"]


def test_erase_user_without_a_terminal_refuses_unless_told(
    memory_url: str, namespace: str, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed_trip(memory_url, namespace)
    monkeypatch.setattr(sys, "stdin", io.StringIO("y\n"))  # piped: not a terminal
    message = assert_one_line_error(
        *run(*store_args(memory_url, namespace), "erase-user", "alice"), 2
    )
    assert "without --yes" in message
    assert exists(memory_url, namespace, "trip")


@pytest.mark.parametrize(("answer", "erased"), [("y\n", True), ("n\n", False), ("", False)])
def test_erase_user_on_a_terminal_asks_first_and_shows_its_progress(
    memory_url: str,
    namespace: str,
    run: Run,
    monkeypatch: pytest.MonkeyPatch,
    answer: str,
    erased: bool,
) -> None:
    seed_trip(memory_url, namespace)
    monkeypatch.setattr(sys, "stdin", Terminal(answer))
    monkeypatch.setattr(sys, "stderr", Terminal())
    code = main([*store_args(memory_url, namespace), "erase-user", "alice"])
    shown = sys.stderr.getvalue()
    assert shown.startswith(
        "erase every chat of user alice and everything derived from them, for good? [y/N] "
    )
    assert exists(memory_url, namespace, "trip") is not erased
    if erased:
        assert code == 0
        assert "\rerasing: chats, 1 of 1" in shown
        assert "\rerasing: record, 1 of 1" in shown
    else:
        assert code == 1
        assert shown.endswith("ctxstore: nothing erased\n")


def test_erase_user_refuses_an_id_that_is_no_user_id(
    memory_url: str, namespace: str, run: Run
) -> None:
    message = assert_one_line_error(
        *run(*store_args(memory_url, namespace), "erase-user", "a{b}", "--yes"), 1
    )
    assert "user_id" in message


def test_export_user_writes_every_chat_of_the_user(
    memory_url: str, namespace: str, run: Run, tmp_path: object
) -> None:
    seed_trip(memory_url, namespace)
    seed_bob(memory_url, namespace)
    code, out, err = run(*store_args(memory_url, namespace), "export-user", "alice")
    assert (code, err) == (0, "")
    records = [json.loads(line) for line in out.splitlines()]
    assert [r["id"] for r in records if r["type"] == "chat"] == ["trip"]
    with ctxstore.connect(memory_url, namespace=namespace).admin() as store:
        assert records == [json.loads(json.dumps(r)) for r in store.export_chat("trip")]


def test_the_receipt_text_names_every_kind() -> None:
    receipt = ErasureReceipt(
        user_id="u",
        chat_ids=("a", "b"),
        removed={"chats": 2, "chat keys": 9},
        started_at=10,
        finished_at=25,
        unreachable=("logs",),
    )
    assert receipt_text(receipt) == (
        "erased user u: 2 chats, 9 keys and entries removed (in 15 ms)\n"
        "  chats: 2\n  chat keys: 9\nnot reachable from here:\n  - logs"
    )


def test_sweep_removes_the_entries_of_gone_chats_and_prints_the_counts(
    memory_url: str, namespace: str, run: Run
) -> None:
    seed_trip(memory_url, namespace)
    with ctxstore.connect(memory_url, namespace=namespace).admin() as store:
        store.upsert_chat("gone", "alice")
        keys = store.state.keyspace.chat("gone")
        store.client.delete(keys.key("chat"), keys.key("branch"))  # as if it expired
    code, out, err = run(*store_args(memory_url, namespace), "sweep", "--grace-ms", "0")
    assert (code, err) == (0, "")
    assert out == (
        "swept: 2 of 4 index entries and 1 of 2 owner-record entries removed (2 keys walked)\n"
    )
    code, out, _err = run(*store_args(memory_url, namespace), "sweep", "--json")
    assert code == 0
    assert json.loads(out)["index_entries_removed"] == 0


def test_migrate_dry_run_counts_then_migrate_marks_and_reports(
    memory_url: str, namespace: str, run: Run
) -> None:
    seed_trip(memory_url, namespace)
    seed_bob(memory_url, namespace)
    code, out, err = run(*store_args(memory_url, namespace), "migrate", "--dry-run")
    assert (code, err) == (0, "")
    assert out == ("dry run: 2 chats (format 2: 2); the keyspace is format 2; nothing changed\n")
    code, out, err = run(*store_args(memory_url, namespace), "migrate", "--json")
    assert (code, err) == (0, "")
    report = json.loads(out)
    assert (report["marked"], report["chats"], report["failed"]) == (True, 2, [])
    code, out, _err = run(*store_args(memory_url, namespace), "migrate")
    assert code == 0
    assert out.startswith("migrated to format 2 (already marked): 2 chats (format 2: 2), ")


def test_migrate_lists_the_chats_it_could_not_migrate_and_exits_1(
    memory_url: str, namespace: str, run: Run
) -> None:
    seed_bob(memory_url, namespace)
    with ctxstore.connect(memory_url, namespace=namespace).admin() as store:
        store.client.hset(store.state.keyspace.chat("bobs").key("chat"), "fmt", "4")
    code, out, _err = run(*store_args(memory_url, namespace), "migrate")
    assert code == 1
    assert "1 failed" in out
    assert "\n  bobs: chat 'bobs' is stored in format 4, which ctxstore" in out


def test_migrate_on_a_terminal_shows_a_progress_bar(
    memory_url: str, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed_trip(memory_url, namespace)
    monkeypatch.setattr(sys, "stderr", Terminal())
    assert main([*store_args(memory_url, namespace), "migrate"]) == 0
    shown = sys.stderr.getvalue()
    assert "\rmigrating: [########################] 1 of 1 chats, " in shown
    assert " 0 failed" in shown


def test_the_progress_bar_says_done_rate_and_what_remains() -> None:
    from ctxstore.cli.lifecycle import progress_bar_text
    from ctxstore.models import MigrationProgress

    shown = progress_bar_text(MigrationProgress(done=250, total=1000, failed=2, elapsed=0.5), 10)
    assert shown == "migrating: [##........] 250 of 1000 chats, 500/s, 2 s left, 2 failed"
    unknown = progress_bar_text(MigrationProgress(done=3, total=None, failed=0, elapsed=1.0))
    assert unknown == "migrating: 3 chats, 3/s, 0 failed"
