"""``ctxstore verify CHAT [--repair] [--json]``, run in process on a named embedded store."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator

import pytest

import ctxstore
from ctxstore import NewMessage
from ctxstore.cli.main import main

Run = Callable[..., tuple[int, str, str]]


@pytest.fixture
def url() -> str:
    """A named embedded store: what the test writes, the CLI (same process) reads."""
    return f"memory://{uuid.uuid4().hex}"


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str], url: str, namespace: str) -> Run:
    """``ctxstore --url URL --namespace NS verify ...``: exit code, stdout, stderr."""

    def invoke(*argv: str) -> tuple[int, str, str]:
        code = main(["--url", url, "--namespace", namespace, "verify", *argv])
        out, err = capsys.readouterr()
        return code, out, err

    return invoke


@pytest.fixture
def store(url: str, namespace: str) -> Iterator[ctxstore.Store]:
    """Chat ``trip`` of alice: three messages on main, an edit of the last one on main-v2."""
    opened = ctxstore.connect(url, namespace=namespace).admin()
    opened.upsert_chat("trip", "alice")
    first = opened.append(
        "trip",
        "main",
        [
            NewMessage({"role": "user", "content": "Plan a weekend."}, id="q"),
            {"role": "assistant", "content": "Alfama."},
            NewMessage({"role": "user", "content": "And Sunday?"}, id="s"),
        ],
        expected_head=None,
    )
    opened.append(
        "trip",
        "main",
        [NewMessage({"role": "user", "content": "And Monday?"}, id="s")],
        expected_head=first.head_message_id,
        on_existing="fork",
    )
    opened.upsert_checkpoint("trip", "start", "q")
    yield opened
    opened.close()


def test_a_sound_chat_prints_ok(store: ctxstore.Store, run: Run) -> None:
    assert run("trip") == (0, "ok: chat trip, 4 messages, 2 branches\n", "")


def test_each_problem_is_one_line_and_the_exit_code_is_1(
    store: ctxstore.Store, run: Run, namespace: str
) -> None:
    keys = store.state.keyspace.chat("trip")
    store.client.hset(keys.key("chat"), "message_count", 9)
    store.client.zrem(store.state.keyspace.user_index("alice"), "trip")
    code, out, err = run("trip")
    assert (code, err) == (1, "")
    assert out.splitlines() == [
        f"count ctx:{namespace}:{{trip}}:chat message_count: says '9', LLEN log is 4",
        f"index ctx:{namespace}:idx:user:{{alice}} trip: the chat is not listed",
    ]


def test_repair_prints_what_it_rebuilt_and_exits_0(
    store: ctxstore.Store, run: Run, namespace: str
) -> None:
    store.client.delete(store.state.keyspace.chat("trip").key("alias"))
    code, out, err = run("trip", "--repair")
    assert (code, err) == (0, "")
    assert out.splitlines() == ["repaired: alias", "ok: chat trip, 4 messages, 2 branches"]
    assert run("trip")[0] == 0
    assert store.get_message("trip", "q")["message"]["content"] == "Plan a weekend."


def test_repair_exits_1_when_problems_remain(store: ctxstore.Store, run: Run) -> None:
    keys = store.state.keyspace.chat("trip")
    store.client.hset(keys.key("chat"), "message_count", 9)
    store.client.hset(keys.key("checkpoint"), "start", "40\tq\t1\t1")
    code, out, _ = run("trip", "--repair")
    assert code == 1
    lines = out.splitlines()
    assert lines[0] == "repaired: message_count"
    assert lines[1:] == [
        f"checkpoint {keys.key('checkpoint')} start: position 40 is not in the log"
    ]


def test_json_prints_the_report(store: ctxstore.Store, run: Run) -> None:
    keys = store.state.keyspace.chat("trip")
    store.client.hset(keys.key("chat"), "branch_count", 7)
    code, out, _ = run("trip", "--json")
    assert code == 1
    assert json.loads(out) == {
        "chat_id": "trip",
        "ok": False,
        "messages": 4,
        "branches": 2,
        "problems": [
            {
                "kind": "count",
                "key": keys.key("chat"),
                "field": "branch_count",
                "detail": "says '7', HLEN branch is 2",
            }
        ],
        "repaired": [],
    }
    code, out, _ = run("trip", "--json", "--repair")
    assert code == 0
    assert json.loads(out)["repaired"] == ["branch_count"]
    assert json.loads(out)["ok"] is True


def test_an_unknown_chat_is_one_error_line(run: Run) -> None:
    assert run("nope") == (1, "", "ctxstore: chat 'nope' does not exist\n")
