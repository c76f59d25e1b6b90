"""``chats`` options, ``branches``, ``checkpoints``, ``delete``, ``tree``/``log`` cuts, and
colour, run in process on a named embedded store."""

from __future__ import annotations

import io
import json
import re
import sys

import pytest

import ctxstore
from tests.cli.conftest import Run
from tests.cli.test_cli import START, assert_one_line_error, fixed_clock, seed_trip, store_args

ANSI = re.compile(r"\x1b\[[0-9;]*m")


# --- chats -----------------------------------------------------------------------------------


def seed_chats(url: str, namespace: str) -> None:
    """Five chats of alice, c0 oldest; c1 and c3 on plan "pro" (a string), c2 on plan 3."""
    for index in range(5):
        clock = fixed_clock(START + index * 60_000)
        with ctxstore.connect(url, namespace=namespace, clock=clock).admin() as store:
            plan: object = "pro" if index in (1, 3) else index
            store.upsert_chat(f"c{index}", "alice", {"plan": plan})


def ids(out: str) -> list[str]:
    return [line.split()[0] for line in out.splitlines()[1:]]


def test_chats_offset_skips_the_newest(memory_url: str, namespace: str, run: Run) -> None:
    seed_chats(memory_url, namespace)
    args = store_args(memory_url, namespace)
    assert ids(run(*args, "chats", "--offset", "1", "--limit", "2")[1]) == ["c3", "c2"]
    assert run(*args, "chats", "--offset", "5") == (0, "no chats\n", "")
    message = assert_one_line_error(*run(*args, "chats", "--offset", "-1"), 2)
    assert "--offset: must be at least 0" in message


def test_chats_metadata_compares_the_value_as_a_string(
    memory_url: str, namespace: str, run: Run
) -> None:
    seed_chats(memory_url, namespace)
    args = store_args(memory_url, namespace)
    assert ids(run(*args, "chats", "--metadata", "plan=pro")[1]) == ["c3", "c1"]
    # c2's plan is the number 3, not the string "3"
    assert run(*args, "chats", "--metadata", "plan=3") == (0, "no chats\n", "")
    twice = run(*args, "chats", "--metadata", "plan=pro", "--metadata", "a=b")
    assert "--metadata is given once" in assert_one_line_error(*twice, 2)
    assert "expected KEY=VALUE" in assert_one_line_error(*run(*args, "chats", "--metadata", "x"), 2)


def test_chats_json_is_the_listed_chats(memory_url: str, namespace: str, run: Run) -> None:
    seed_chats(memory_url, namespace)
    code, out, err = run(*store_args(memory_url, namespace), "chats", "--json", "--limit", "2")
    assert (code, err) == (0, "")
    listed = json.loads(out)
    assert [chat["id"] for chat in listed] == ["c4", "c3"]
    assert listed[1]["metadata"] == {"plan": "pro"}
    assert listed[1]["message_count"] == 0
    assert listed[1]["branch_count"] == 1
    empty = run(*store_args(memory_url, namespace), "chats", "--json", "--user", "nobody")
    assert empty == (0, "[]\n", "")


# --- branches, checkpoints -------------------------------------------------------------------


def test_branches_lists_each_with_its_head_and_the_active_one_marked(
    memory_url: str, namespace: str, run: Run
) -> None:
    seed_trip(memory_url, namespace)
    code, out, err = run(*store_args(memory_url, namespace), "branches", "trip")
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        "BRANCH    HEAD      MESSAGES  CREATED",
        "main      dddddddd         3  2023-11-14T22:13:20Z",
        "main-v2*  cccccccc         2  2023-11-14T22:13:20Z",
    ]


def test_checkpoints_lists_them_newest_first(memory_url: str, namespace: str, run: Run) -> None:
    seed_trip(memory_url, namespace)
    args = store_args(memory_url, namespace)
    code, out, _ = run(*args, "checkpoints", "trip")
    assert code == 0
    assert out.splitlines() == [
        "CHECKPOINT  MESSAGE   CREATED",
        "plan-b      cccccccc  2023-11-14T22:13:20Z",
        "start       aaaaaaaa  2023-11-14T22:13:20Z",
    ]
    with ctxstore.connect(memory_url, namespace=namespace).admin() as store:
        store.upsert_chat("bare", "alice")
    assert run(*args, "checkpoints", "bare") == (0, "chat 'bare' has no checkpoints\n", "")
    assert assert_one_line_error(*run(*args, "branches", "nope"), 1) == "chat 'nope' does not exist"


# --- tree and log cuts -----------------------------------------------------------------------


def test_tree_of_one_branch_and_of_the_newest_messages(
    memory_url: str, namespace: str, run: Run
) -> None:
    seed_trip(memory_url, namespace)
    args = store_args(memory_url, namespace)
    _, out, _ = run(*args, "tree", "trip", "--branch", "main-v2")
    assert out.splitlines() == [
        "aaaaaaaa user: Plan a weekend in Lisbon. (checkpoints: start)",
        "cccccccc assistant: Day 1: LX Factory. [main-v2*] (checkpoints: plan-b)",
        "(2 messages not shown)",
    ]
    _, out, _ = run(*args, "tree", "trip", "--limit", "1")
    assert out.splitlines() == [
        "cccccccc assistant: Day 1: LX Factory. [main-v2*] (checkpoints: plan-b)",
        "(3 messages not shown)",
    ]
    _, out, _ = run(*args, "tree", "trip", "--branch", "main", "--limit", "2")
    assert out.splitlines() == [
        "bbbbbbbb assistant: Day 1: Alfama. Day 2: Belem.",
        "dddddddd user: And on Sunday? [main]",
        "(2 messages not shown)",
    ]
    missing = run(*args, "tree", "trip", "--branch", "nope")
    assert assert_one_line_error(*missing, 1) == "branch 'nope' does not exist in chat 'trip'"


def test_log_of_the_newest_messages_says_how_many_of_all(
    memory_url: str, namespace: str, run: Run
) -> None:
    seed_trip(memory_url, namespace)
    args = store_args(memory_url, namespace)
    _, out, _ = run(*args, "log", "trip", "--branch", "main", "--limit", "1")
    assert out.splitlines() == [
        "branch main: 3 messages, the newest 1 shown",
        "dddddddd user: And on Sunday?",
    ]
    _, out, _ = run(*args, "log", "trip", "--limit", "5")
    assert out.splitlines()[0] == "branch main-v2 (active): 2 messages"


# --- delete ----------------------------------------------------------------------------------


class Terminal(io.StringIO):
    """A stdin that is a terminal, with the user's answer typed in."""

    def isatty(self) -> bool:
        return True


def exists(url: str, namespace: str, chat_id: str) -> bool:
    with ctxstore.connect(url, namespace=namespace).admin() as store:
        try:
            store.get_chat(chat_id)
        except ctxstore.ChatNotFoundError:
            return False
        return True


def test_delete_with_yes_deletes_without_asking(memory_url: str, namespace: str, run: Run) -> None:
    seed_trip(memory_url, namespace)
    args = store_args(memory_url, namespace)
    assert run(*args, "delete", "trip", "--yes") == (0, "deleted chat trip\n", "")
    assert not exists(memory_url, namespace, "trip")
    again = run(*args, "delete", "trip", "--yes")
    assert assert_one_line_error(*again, 1) == "chat 'trip' does not exist"


def test_delete_without_a_terminal_refuses_unless_told(
    memory_url: str, namespace: str, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed_trip(memory_url, namespace)
    monkeypatch.setattr(sys, "stdin", io.StringIO("y\n"))  # piped: not a terminal
    message = assert_one_line_error(*run(*store_args(memory_url, namespace), "delete", "trip"), 2)
    assert "without --yes" in message
    assert exists(memory_url, namespace, "trip")


@pytest.mark.parametrize(
    ("answer", "deleted"), [("y\n", True), ("YES\n", True), ("n\n", False), ("", False)]
)
def test_delete_on_a_terminal_asks_first(
    memory_url: str,
    namespace: str,
    run: Run,
    monkeypatch: pytest.MonkeyPatch,
    answer: str,
    deleted: bool,
) -> None:
    seed_trip(memory_url, namespace)
    monkeypatch.setattr(sys, "stdin", Terminal(answer))
    code, out, err = run(*store_args(memory_url, namespace), "delete", "trip")
    assert err.startswith(
        "delete chat trip (Weekend in Lisbon) of alice, last updated 2023-11-14T22:13:20Z, "
        "for good? [y/N] "
    )
    assert exists(memory_url, namespace, "trip") is not deleted
    if deleted:
        assert (code, out) == (0, "deleted chat trip\n")
    else:
        assert (code, out) == (1, "")
        assert err.endswith("ctxstore: nothing deleted\n")


# --- colour ----------------------------------------------------------------------------------


@pytest.fixture
def terminal_stdout(monkeypatch: pytest.MonkeyPatch) -> None:
    """stdout (captured) claims to be a terminal; no NO_COLOR, no dumb terminal."""
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")


@pytest.mark.parametrize(
    "command",
    [["chats"], ["tree", "trip"], ["log", "trip"], ["branches", "trip"], ["checkpoints", "trip"]],
)
def test_colour_on_a_terminal_only_and_never_with_no_color(
    memory_url: str,
    namespace: str,
    run: Run,
    monkeypatch: pytest.MonkeyPatch,
    command: list[str],
) -> None:
    seed_trip(memory_url, namespace)
    args = store_args(memory_url, namespace)
    plain = run(*args, *command)[1]
    assert not ANSI.search(plain)  # captured output is no terminal
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    coloured = run(*args, *command)[1]
    assert ANSI.search(coloured)
    assert ANSI.sub("", coloured) == plain  # the same text, coloured
    monkeypatch.setenv("NO_COLOR", "1")
    assert run(*args, *command)[1] == plain
    monkeypatch.setenv("NO_COLOR", "")  # empty: colour stays on (no-color.org)
    assert ANSI.search(run(*args, *command)[1])
    monkeypatch.setenv("TERM", "dumb")
    assert run(*args, *command)[1] == plain


def test_stored_escapes_stay_harmless_in_colour(
    memory_url: str, namespace: str, run: Run, terminal_stdout: None
) -> None:
    with ctxstore.connect(memory_url, namespace=namespace).admin() as store:
        store.upsert_chat("c1", "alice")
        store.append(
            "c1",
            "main",
            [{"role": "\x1b[2Juser", "content": "\x1b[31mred"}],
            expected_head=None,
        )
    for command in ("tree", "log"):
        out = run(*store_args(memory_url, namespace), command, "c1")[1]
        assert "\x1b[2J" not in out
        assert "\x1b[31m" not in out
        assert "�[31mred" in ANSI.sub("", out)


def test_an_error_is_red_on_a_terminal_only(
    memory_url: str, namespace: str, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    args = store_args(memory_url, namespace)
    assert run(*args, "tree", "nope")[2] == "ctxstore: chat 'nope' does not exist\n"
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    err = run(*args, "tree", "nope")[2]
    assert err == "\x1b[31mctxstore:\x1b[0m chat 'nope' does not exist\n"
    monkeypatch.setenv("NO_COLOR", "yes")
    assert run(*args, "tree", "nope")[2] == "ctxstore: chat 'nope' does not exist\n"
