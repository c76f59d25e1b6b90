"""The ``ctxstore`` command line, in process (``main``) and as a program (``python -m``)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable

import pytest

import ctxstore
from ctxstore import NewMessage
from ctxstore.cli.main import DEFAULT_CHAT_LIMIT, MEMORY_NOTE
from ctxstore.cli.tree import visualize_graph

START = 1_700_000_000_000  # 2023-11-14T22:13:20Z
TRIP_TREE = [
    "aaaaaaaa user: Plan a weekend in Lisbon. (checkpoints: start)",
    "├── bbbbbbbb assistant: Day 1: Alfama. Day 2: Belem.",
    "│   dddddddd user: And on Sunday? [main]",
    "└── cccccccc assistant: Day 1: LX Factory. [main-v2*] (checkpoints: plan-b)",
]

Run = Callable[..., tuple[int, str, str]]


def fixed_clock(now: int) -> Callable[[], int]:
    return lambda: now


def seed_trip(url: str, namespace: str, *, now: int = START) -> None:
    """Chat ``trip`` of alice: a question, two answers (main, main-v2 active), checkpoints.

    ``main`` ends at ``dddd`` (a follow-up to ``bbbb``), ``main-v2`` at ``cccc``.
    """
    with ctxstore.connect(url, namespace=namespace, clock=fixed_clock(now)).admin() as store:
        store.upsert_chat("trip", "alice")
        store.update_chat("trip", title="Weekend in Lisbon")
        first = store.append(
            "trip",
            "main",
            [
                NewMessage({"role": "user", "content": "Plan a weekend in Lisbon."}, id="a" * 12),
                NewMessage(
                    {"role": "assistant", "content": "Day 1: Alfama.\nDay 2: Belem."}, id="b" * 12
                ),
                NewMessage({"role": "user", "content": "And on Sunday?"}, id="d" * 12),
            ],
            expected_head=None,
        )
        retry = store.create_branch("trip", "a" * 12)
        store.append(
            "trip",
            retry.name,
            [NewMessage({"role": "assistant", "content": "Day 1: LX Factory."}, id="c" * 12)],
            expected_head=retry.head_message_id,
        )
        store.upsert_checkpoint("trip", "start", first.message_ids[0])
        store.upsert_checkpoint("trip", "plan-b", "c" * 12)


def store_args(url: str, namespace: str) -> list[str]:
    return ["--url", url, "--namespace", namespace]


def assert_one_line_error(code: int, out: str, err: str, expected_code: int) -> str:
    """The failure contract: exit code, nothing on stdout, one ``ctxstore:`` line on stderr."""
    assert code == expected_code
    assert out == ""
    assert err.startswith("ctxstore: ")
    assert err.endswith("\n")
    assert err.count("\n") == 1, err
    assert "Traceback" not in err
    return err.removeprefix("ctxstore: ").rstrip("\n")


# --- every subcommand on every backend --------------------------------------------------------


def test_chats_on_every_backend(backend: str, namespace: str, run: Run) -> None:
    seed_trip(backend, namespace)
    code, out, err = run(*store_args(backend, namespace), "chats")
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        "ID    USER   TITLE              MESSAGES  BRANCHES  UPDATED",
        "trip  alice  Weekend in Lisbon         4         2  2023-11-14T22:13:20Z",
    ]


def test_tree_on_every_backend(backend: str, namespace: str, run: Run) -> None:
    seed_trip(backend, namespace)
    code, out, err = run(*store_args(backend, namespace), "tree", "trip")
    assert (code, err) == (0, "")
    assert out.splitlines() == TRIP_TREE


def test_log_on_every_backend(backend: str, namespace: str, run: Run) -> None:
    seed_trip(backend, namespace)
    code, out, err = run(*store_args(backend, namespace), "log", "trip")
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        "branch main-v2 (active): 2 messages",
        "aaaaaaaa user: Plan a weekend in Lisbon.",
        "cccccccc assistant: Day 1: LX Factory.",
    ]


@pytest.mark.parametrize("fmt", ["json", "mermaid", "dot"])
def test_export_on_every_backend(backend: str, namespace: str, run: Run, fmt: str) -> None:
    seed_trip(backend, namespace)
    code, out, err = run(*store_args(backend, namespace), "export", "trip", "--format", fmt)
    assert (code, err) == (0, "")
    with ctxstore.connect(backend, namespace=namespace).admin() as store:
        graph = store.get_graph("trip")
    if fmt == "json":
        assert ctxstore.models.ChatGraph.model_validate(json.loads(out)) == graph
    elif fmt == "mermaid":
        assert out.startswith("flowchart TD\n")
        assert out.count(" --> ") == 3
        assert out.count(" -.-> ") == 4
    else:
        assert out.startswith("digraph chat {\n")
        assert out.count(" -> ") == 7


def test_unknown_chat_on_every_backend(backend: str, namespace: str, run: Run) -> None:
    for command in (["tree", "nope"], ["log", "nope"], ["export", "nope"]):
        message = assert_one_line_error(*run(*store_args(backend, namespace), *command), 1)
        assert message == "chat 'nope' does not exist"


# --- demo ------------------------------------------------------------------------------------


def test_demo_runs_on_the_embedded_store(run: Run) -> None:
    code, out, err = run("demo")
    assert (code, err) == (0, "")
    assert out.strip()


# --- chats -----------------------------------------------------------------------------------


def test_chats_lists_newest_first_and_filters_and_limits(
    memory_url: str, namespace: str, run: Run
) -> None:
    seed_trip(memory_url, namespace, now=START)
    with ctxstore.connect(
        memory_url, namespace=namespace, clock=fixed_clock(START + 60_000)
    ).admin() as s:
        s.upsert_chat("notes", "bob")
    args = store_args(memory_url, namespace)
    _, out, _ = run(*args, "chats")
    assert out.splitlines() == [
        "ID     USER   TITLE              MESSAGES  BRANCHES  UPDATED",
        "notes  bob    -                         0         1  2023-11-14T22:14:20Z",
        "trip   alice  Weekend in Lisbon         4         2  2023-11-14T22:13:20Z",
    ]
    _, out, _ = run(*args, "chats", "--user", "alice")
    assert [line.split()[0] for line in out.splitlines()] == ["ID", "trip"]
    _, out, _ = run(*args, "chats", "--limit", "1")
    assert [line.split()[0] for line in out.splitlines()] == ["ID", "notes"]


def test_chats_lists_at_most_50_by_default(memory_url: str, namespace: str, run: Run) -> None:
    with ctxstore.connect(memory_url, namespace=namespace).admin() as store:
        for index in range(DEFAULT_CHAT_LIMIT + 1):
            store.upsert_chat(f"c{index}", "alice")
    code, out, _ = run(*store_args(memory_url, namespace), "chats")
    assert code == 0
    assert len(out.splitlines()) == 1 + 50


def test_chats_says_when_there_are_none(memory_url: str, namespace: str, run: Run) -> None:
    assert run(*store_args(memory_url, namespace), "chats") == (0, "no chats\n", "")
    code, out, _ = run(*store_args(memory_url, namespace), "chats", "--user", "bob")
    assert (code, out) == (0, "no chats for user 'bob'\n")


def test_chats_titles_stay_on_one_printable_line(memory_url: str, namespace: str, run: Run) -> None:
    with ctxstore.connect(memory_url, namespace=namespace).admin() as store:
        store.upsert_chat("c1", "alice")
        store.update_chat("c1", title="placeholder")
        # The API refuses such a title now; data written before (or by hand) may hold one.
        chat_key = store.state.keyspace.chat("c1").key("chat")
        store.client.hset(chat_key, "title", "two\nlines \x1b[2J" + "x" * 100)
    code, out, _ = run(*store_args(memory_url, namespace), "chats")
    assert code == 0
    [_, row] = out.splitlines()
    assert "two lines �[2J" in row
    assert "…" in row
    assert "\x1b" not in out


# --- tree ------------------------------------------------------------------------------------


def test_tree_prints_the_visualized_graph(memory_url: str, namespace: str, run: Run) -> None:
    seed_trip(memory_url, namespace)
    _, out, _ = run(*store_args(memory_url, namespace), "tree", "trip")
    with ctxstore.connect(memory_url, namespace=namespace).admin() as store:
        assert out == visualize_graph(store.get_graph("trip")) + "\n"


def test_tree_of_an_empty_chat(memory_url: str, namespace: str, run: Run) -> None:
    with ctxstore.connect(memory_url, namespace=namespace).admin() as store:
        store.upsert_chat("fresh", "alice")
    code, out, _ = run(*store_args(memory_url, namespace), "tree", "fresh")
    assert (code, out) == (0, "chat 'fresh' has no messages\n(empty branches: main*)\n")


# --- log -------------------------------------------------------------------------------------


def test_log_of_a_named_branch_indents_continuation_lines(
    memory_url: str, namespace: str, run: Run
) -> None:
    seed_trip(memory_url, namespace)
    code, out, _ = run(*store_args(memory_url, namespace), "log", "trip", "--branch", "main")
    assert code == 0
    assert out.splitlines() == [
        "branch main: 3 messages",
        "aaaaaaaa user: Plan a weekend in Lisbon.",
        "bbbbbbbb assistant: Day 1: Alfama.",
        "         Day 2: Belem.",
        "dddddddd user: And on Sunday?",
    ]


def test_log_shows_full_text_tool_calls_and_no_terminal_escapes(
    memory_url: str, namespace: str, run: Run
) -> None:
    long_text = "word " * 100
    call = {"id": "t1", "type": "function", "function": {"name": "search", "arguments": "{}"}}
    with ctxstore.connect(memory_url, namespace=namespace).admin() as store:
        store.upsert_chat("c1", "alice")
        store.append(
            "c1",
            "main",
            [
                NewMessage({"role": "user", "content": long_text}, id="m1"),
                NewMessage({"role": "assistant", "content": None, "tool_calls": [call]}, id="m2"),
                NewMessage({"role": "tool", "content": "\x1b[31mred\r\n\nend"}, id="m3"),
            ],
            expected_head=None,
        )
    code, out, _ = run(*store_args(memory_url, namespace), "log", "c1")
    assert code == 0
    assert out.splitlines() == [
        "branch main (active): 3 messages",
        f"m1 user: {long_text.rstrip()}",
        "m2 assistant: calls search",
        "m3 tool: �[31mred",
        "",
        "         end",
    ]


def test_log_header_counts_the_messages(memory_url: str, namespace: str, run: Run) -> None:
    args = [*store_args(memory_url, namespace), "log", "fresh"]
    with ctxstore.connect(memory_url, namespace=namespace).admin() as store:
        store.upsert_chat("fresh", "alice")
        assert run(*args) == (0, "branch main (active): 0 messages\n", "")
        store.append("fresh", "main", [NewMessage({"role": "user"}, id="m1")], expected_head=None)
    assert run(*args) == (0, "branch main (active): 1 message\nm1 user:\n", "")


def test_log_of_an_unknown_branch_says_so(memory_url: str, namespace: str, run: Run) -> None:
    seed_trip(memory_url, namespace)
    result = run(*store_args(memory_url, namespace), "log", "trip", "--branch", "nope")
    assert assert_one_line_error(*result, 1) == "branch 'nope' does not exist in chat 'trip'"


# --- export ----------------------------------------------------------------------------------


def test_export_defaults_to_json(memory_url: str, namespace: str, run: Run) -> None:
    seed_trip(memory_url, namespace)
    args = store_args(memory_url, namespace)
    assert run(*args, "export", "trip") == run(*args, "export", "trip", "--format", "json")


# --- choosing the store ----------------------------------------------------------------------


def test_without_url_the_store_comes_from_ctxstore_url(
    memory_url: str, namespace: str, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed_trip(memory_url, namespace)
    monkeypatch.setenv("CTXSTORE_URL", memory_url)
    code, out, _ = run("--namespace", namespace, "tree", "trip")
    assert (code, out.splitlines()) == (0, TRIP_TREE)


def test_without_url_or_environment_the_command_refuses_and_says_how_to_name_a_store(
    run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CTXSTORE_URL", raising=False)
    code, out, err = run("chats")
    assert (code, out) == (1, "")
    assert err.startswith("ctxstore: no store URL")
    assert "CTXSTORE_URL" in err
    assert "redis://" in err


def test_an_embedded_store_asked_for_comes_with_a_note_of_where_its_data_lives(
    run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CTXSTORE_URL", "memory://")
    code, out, err = run("chats")
    assert (code, out) == (0, "no chats\n")
    assert err == MEMORY_NOTE + "\n"
    assert "in this process, gone when it exits" in err
    assert "--url redis://" in err


def test_no_note_when_a_store_is_named(
    memory_url: str, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CTXSTORE_URL", raising=False)
    assert run("--url", memory_url, "chats") == (0, "no chats\n", "")
    monkeypatch.setenv("CTXSTORE_URL", memory_url)
    assert run("chats") == (0, "no chats\n", "")
    assert run("demo")[2] == ""  # the demo makes its own store


def test_namespaces_fence_the_data(memory_url: str, namespace: str, run: Run) -> None:
    seed_trip(memory_url, namespace)
    result = run(*store_args(memory_url, namespace + "x"), "tree", "trip")
    assert assert_one_line_error(*result, 1) == "chat 'trip' does not exist"


# --- errors ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "pattern"),
    [
        (["--url", "foo://x", "chats"], r"unsupported store URL scheme 'foo'"),
        (["--url", "redis://127.0.0.1:1", "chats"], r"unreachable"),
        (["--url", "memory://t", "--namespace", "a{b", "chats"], r"namespace must not contain"),
    ],
)
def test_store_errors_are_one_line_and_exit_1(run: Run, argv: list[str], pattern: str) -> None:
    assert re.search(pattern, assert_one_line_error(*run(*argv), 1))


@pytest.mark.parametrize(
    ("argv", "pattern"),
    [
        ([], r"required: COMMAND .*'ctxstore --help'"),
        (["tree"], r"required: CHAT .*'ctxstore tree --help'"),
        (["frobnicate"], r"invalid choice: 'frobnicate'"),
        (["export", "c1", "--format", "png"], r"invalid choice: 'png'"),
        (["chats", "--limit", "0"], r"--limit: must be at least 1"),
        (["chats", "--limit", "many"], r"--limit: expected a whole number"),
        (["chats", "--bogus"], r"unrecognized arguments: --bogus"),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(run: Run, argv: list[str], pattern: str) -> None:
    assert re.search(pattern, assert_one_line_error(*run(*argv), 2))


def test_help_prints_usage_and_exits_0(run: Run) -> None:
    code, out, err = run("--help")
    assert (code, err) == (0, "")
    assert out.startswith("usage: ctxstore")
    for command in (
        "demo",
        "chats",
        "tree",
        "log",
        "branches",
        "checkpoints",
        "export",
        "import",
        "delete",
        "verify",
        "worker",
    ):
        assert command in out


# --- as a program ----------------------------------------------------------------------------


def run_program(*argv: str) -> subprocess.CompletedProcess[str]:
    """``python -m ctxstore.cli`` (what the ``ctxstore`` console script runs), no CTXSTORE_URL."""
    env = {key: value for key, value in os.environ.items() if key != "CTXSTORE_URL"}
    return subprocess.run(
        [sys.executable, "-m", "ctxstore.cli", *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    ("argv", "code", "stderr"),
    [
        (["--url", "memory://t", "tree", "nope"], 1, "ctxstore: chat 'nope' does not exist\n"),
        (["tree", "nope"], 1, "ctxstore: no store URL"),
        (["--url", "foo://x", "chats"], 1, "ctxstore: unsupported store URL scheme 'foo'"),
        (["log"], 2, "ctxstore: the following arguments are required: CHAT"),
    ],
)
def test_program_errors_exit_non_zero_with_one_line(
    argv: list[str], code: int, stderr: str
) -> None:
    result = run_program(*argv)
    assert result.returncode == code
    assert result.stdout == ""
    assert result.stderr.startswith(stderr)
    assert result.stderr.count("\n") == 1


def test_program_reads_a_server_written_by_another_process(
    server_backend: str, namespace: str
) -> None:
    seed_trip(server_backend, namespace)
    result = run_program(*store_args(server_backend, namespace), "tree", "trip")
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout.splitlines() == TRIP_TREE
