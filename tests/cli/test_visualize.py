"""The ASCII tree of a chat graph."""

from __future__ import annotations

from ctxstore.cli.tree import node_label, printable, short_id, visualize_graph
from tests.cli import branch, chain, chat_graph, checkpoint, node

FORK = [
    node("root0000-x", preview="Plan a weekend in Lisbon.", at=1),
    node("answer01-x", "root0000-x", role="assistant", preview="Alfama.", at=2),
    node("follow01-x", "answer01-x", preview="And on Sunday?", at=4),
    node("answer02-x", "root0000-x", role="assistant", preview="LX Factory.", at=3),
]


def test_forks_indent_and_only_children_continue_straight_below() -> None:
    graph = chat_graph(
        FORK,
        [branch("main", "follow01-x"), branch("main-v2", "answer02-x", active=True)],
        [checkpoint("plan-b", "answer02-x"), checkpoint("start", "root0000-x")],
    )
    assert visualize_graph(graph).splitlines() == [
        "root0000 user: Plan a weekend in Lisbon. (checkpoints: start)",
        "├── answer01 assistant: Alfama.",
        "│   follow01 user: And on Sunday? [main]",
        "└── answer02 assistant: LX Factory. [main-v2*] (checkpoints: plan-b)",
    ]


def test_nested_forks_keep_the_bar_only_under_siblings_still_to_come() -> None:
    graph = chat_graph(
        [
            node("r", at=0),
            node("a", "r", at=1),
            node("a1", "a", at=2),
            node("a2", "a", at=3),
            node("b", "r", at=4),
            node("b1", "b", at=5),
            node("b2", "b", at=6),
        ]
    )
    assert visualize_graph(graph).splitlines() == [
        "r user: hello",
        "├── a user: hello",
        "│   ├── a1 user: hello",
        "│   └── a2 user: hello",
        "└── b user: hello",
        "    ├── b1 user: hello",
        "    └── b2 user: hello",
    ]


def test_children_come_in_creation_order_then_by_id() -> None:
    graph = chat_graph(
        [
            node("root", at=0),
            node("zz-late", "root", at=9),
            node("yy-early", "root", at=1),
            node("bb-tie", "root", at=5),
            node("aa-tie", "root", at=5),
        ]
    )
    firsts = [line.split()[1] for line in visualize_graph(graph).splitlines()[1:]]
    assert firsts == ["yy-early", "aa-tie", "bb-tie", "zz-late"]


def test_several_roots_start_at_the_left_edge_separated_by_a_blank_line() -> None:
    graph = chat_graph(
        [node("one", at=0), node("one-kid", "one", at=1), node("two", at=2)],
    )
    assert visualize_graph(graph).splitlines() == [
        "one user: hello",
        "one-kid user: hello",
        "",
        "two user: hello",
    ]


def test_a_message_whose_parent_is_missing_is_drawn_as_a_root() -> None:
    graph = chat_graph([node("root", at=0), node("orphan", "gone", at=1)])
    assert visualize_graph(graph).splitlines() == ["root user: hello", "", "orphan user: hello"]


def test_marks_keep_branch_order_star_the_active_one_and_date_checkpoints() -> None:
    graph = chat_graph(
        [node("m1")],
        [branch("main", "m1", active=True), branch("alt", "m1"), branch("main-v2", "m1")],
        [checkpoint("alpha", "m1", at=2), checkpoint("zeta", "m1", at=1)],
    )
    assert visualize_graph(graph) == (
        "m1 user: hello [main*, alt, main-v2] (checkpoints: zeta, alpha)"
    )


def test_an_empty_chat_says_it_has_no_messages_and_names_its_branches() -> None:
    graph = chat_graph([], [branch("main", None, active=True)], chat_id="fresh")
    assert visualize_graph(graph).splitlines() == [
        "chat 'fresh' has no messages",
        "(empty branches: main*)",
    ]


def test_empty_branches_are_listed_after_the_tree() -> None:
    graph = chat_graph([node("m1")], [branch("main", "m1"), branch("scratch", None, active=True)])
    assert visualize_graph(graph).splitlines() == [
        "m1 user: hello [main]",
        "(empty branches: scratch*)",
    ]


def test_labels_are_one_short_line_with_an_eight_character_id() -> None:
    long_id = "0123456789abcdef"
    graph = chat_graph(
        [node(long_id, role="assi\nstant", preview="line one\n  line two " + "x" * 200)]
    )
    [line] = visualize_graph(graph).splitlines()
    assert line.startswith("01234567 assi stant: line one line two x")
    assert line.endswith("…")
    assert len(line) < 100
    assert short_id(long_id) == "01234567"


def test_terminal_escapes_in_stored_text_are_neutralised() -> None:
    hostile = node("m1", role="user\x1b[31m", preview="\x1b[2Jclear\x07 \x9b1m")
    graph = chat_graph([hostile], [branch("main", "m1")])
    text = visualize_graph(graph)
    assert "\x1b" not in text
    assert "\x07" not in text
    assert "\x9b" not in text
    assert "�[2Jclear" in node_label(hostile)
    assert printable("tab\tand\nnewline\x00") == "tab\tand\nnewline�"


def test_a_5000_deep_chain_draws_without_recursion_or_growing_indentation() -> None:
    messages = chain(5000)
    graph = chat_graph(messages, [branch("main", messages[-1].id, active=True)])
    lines = visualize_graph(graph).splitlines()
    assert len(lines) == 5000
    assert lines[0] == "m0000000 user: hello"
    assert lines[-1] == "m0004999 user: hello [main*]"
    assert max(len(line) for line in lines) < 40


def test_forks_nested_past_the_recursion_limit_draw_iteratively() -> None:
    messages = chain(1500)
    leaves = [node(f"leaf{index}", parent.id, at=-1) for index, parent in enumerate(messages[:-1])]
    lines = visualize_graph(chat_graph(messages + leaves)).splitlines()
    assert len(lines) == 2999
    assert lines[1] == "├── leaf0 user: hello"
    assert lines[2] == "└── m0000001 user: hello"
    assert lines[-1].endswith("└── m0001499 user: hello")
