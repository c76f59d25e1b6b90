"""JSON, Mermaid and DOT exports of a chat graph."""

from __future__ import annotations

import json
import re

from ctxstore import ChatMeta
from ctxstore.cli.diagrams import to_dot, to_json, to_mermaid
from ctxstore.cli.tree import node_label
from ctxstore.models import ChatGraph
from tests.cli import branch, chat_graph, checkpoint, node

HOSTILE = ['"]; drop', "<script>alert(1)</script>", "a\\", "#quot; `md` {x} |y| & end"]


def sample() -> ChatGraph:
    """Three messages with a fork, two branches (one empty), two checkpoints."""
    return chat_graph(
        [
            node("root", at=1),
            node("left", "root", role="assistant", at=2),
            node("right", "root", role="assistant", at=3),
        ],
        [
            branch("main", "left", active=True),
            branch("main-v2", "right"),
            branch("empty", None),
        ],
        [checkpoint("start", "root"), checkpoint("retry", "right")],
    )


def hostile() -> ChatGraph:
    messages = [node("m0", preview="hi")] + [
        node(f"m{index + 1}", "m0", role=text, preview=text, at=index)
        for index, text in enumerate(HOSTILE)
    ]
    branches = [branch(text, "m1") for text in HOSTILE]
    return chat_graph(messages, branches, [checkpoint(HOSTILE[0], "m2")], chat_id='c"1')


# --- JSON ------------------------------------------------------------------------------------


def test_json_holds_the_whole_graph_and_loads_back_equal() -> None:
    graph = sample()
    data = json.loads(to_json(graph))
    assert set(data) == {"chat", "messages", "branches", "checkpoints"}
    assert [message["id"] for message in data["messages"]] == ["root", "left", "right"]
    assert data["messages"][1]["parent_id"] == "root"
    assert data["branches"][2]["head_message_id"] is None
    assert ChatGraph.model_validate(data) == graph


def test_json_is_stable_sorted_and_ascii() -> None:
    graph = chat_graph([node("m1", preview='café ☕ "quoted"\n')])
    text = to_json(graph)
    assert text == to_json(graph)
    assert text == json.dumps(json.loads(text), indent=2, sort_keys=True)
    assert text.isascii()
    assert json.loads(text)["messages"][0]["preview"] == 'café ☕ "quoted"\n'


def test_json_writes_metadata_json_cannot_hold_as_its_repr() -> None:
    chat = ChatMeta(id="c1", user_id="u", metadata={"raw": b"\x00\xff"}, created_at=0, updated_at=0)
    graph = ChatGraph(chat=chat, messages=(), branches=(), checkpoints=())
    assert json.loads(to_json(graph))["chat"]["metadata"] == {"raw": repr(b"\x00\xff")}


# --- Mermaid ---------------------------------------------------------------------------------

MERMAID_NODE = re.compile(
    r'^    (?P<key>[mp]\d+)(?P<open>\[|\(\[|\{\{)"(?P<label>[^"]*)"(?P<close>\]|\]\)|\}\})$'
)
MERMAID_EDGE = re.compile(r"^    (?P<source>[mp]\d+) (?P<arrow>-->|-\.->) (?P<target>m\d+)$")


def mermaid_parts(text: str) -> tuple[list[re.Match[str]], list[re.Match[str]]]:
    """Node and edge statements; fails if any line is neither (or the header is wrong)."""
    header, *body = text.splitlines()
    assert header == "flowchart TD"
    nodes = [match for line in body if (match := MERMAID_NODE.match(line))]
    edges = [match for line in body if (match := MERMAID_EDGE.match(line))]
    assert len(nodes) + len(edges) == len(body), body
    return nodes, edges


def test_mermaid_has_a_node_per_message_branch_and_checkpoint() -> None:
    nodes, _ = mermaid_parts(to_mermaid(sample()))
    shapes = {match["label"]: (match["open"], match["close"]) for match in nodes}
    assert len(nodes) == 3 + 3 + 2
    assert shapes["root user: hello"] == ("[", "]")
    assert shapes["branch: main (active)"] == ("([", "])")
    assert shapes["checkpoint: start"] == ("{{", "}}")


def test_mermaid_edges_run_parent_to_child_and_pointer_to_message() -> None:
    nodes, edges = mermaid_parts(to_mermaid(sample()))
    key = {match["label"].split(" ")[0]: match["key"] for match in nodes}
    solid = {(edge["source"], edge["target"]) for edge in edges if edge["arrow"] == "-->"}
    dotted = [edge for edge in edges if edge["arrow"] == "-.->"]
    assert solid == {(key["root"], key["left"]), (key["root"], key["right"])}
    # main, main-v2, start, retry; the empty branch points nowhere.
    assert len(dotted) == 4
    assert {edge["target"] for edge in dotted} == {key["left"], key["right"], key["root"]}


def test_mermaid_labels_cannot_break_out() -> None:
    output = to_mermaid(hostile())
    nodes, edges = mermaid_parts(output)
    assert len(nodes) == 1 + 2 * len(HOSTILE) + 1
    assert len(edges) == 2 * len(HOSTILE) + 1
    for match in nodes:
        bare = re.sub(r"#\d+;", "", match["label"])
        assert not set(bare) & set('"[]{}<>;`|&\\#'), match["label"]
    for text in HOSTILE:
        assert text not in output


def test_mermaid_entities_decode_back_to_the_labels() -> None:
    graph = hostile()
    nodes, _ = mermaid_parts(to_mermaid(graph))
    decoded = [
        re.sub(r"#(\d+);", lambda code: chr(int(code[1])), match["label"]) for match in nodes
    ]
    expected = [node_label(message) for message in graph.messages]
    expected += [f"branch: {text}" for text in HOSTILE] + [f"checkpoint: {HOSTILE[0]}"]
    assert decoded == expected


# --- DOT -------------------------------------------------------------------------------------

DOT_STRING = r'"(?:[^"\\]|\\.)*"'
DOT_NODE = re.compile(
    rf"^    (?P<key>[mp]\d+) \[label=(?P<label>{DOT_STRING})(?P<style>[^\"]*)\];$"
)
DOT_EDGE = re.compile(
    r"^    (?P<source>[mp]\d+) -> (?P<target>m\d+)(?P<style> \[style=dashed\])?;$"
)
DOT_PREAMBLE = re.compile(
    rf'^    (label={DOT_STRING}|labelloc=t|node \[shape=box, fontname="Helvetica"\]);$'
)


def dot_parts(text: str) -> tuple[list[re.Match[str]], list[re.Match[str]]]:
    """Node and edge statements; fails on any other line or unbalanced braces."""
    lines = text.splitlines()
    assert lines[0] == "digraph chat {"
    assert lines[-1] == "}"
    body = lines[1:-1]
    nodes = [match for line in body if (match := DOT_NODE.match(line))]
    edges = [match for line in body if (match := DOT_EDGE.match(line))]
    preamble = [line for line in body if DOT_PREAMBLE.match(line)]
    assert len(nodes) + len(edges) + len(preamble) == len(body), body
    return nodes, edges


def dot_unquote(label: str) -> str:
    return re.sub(r"\\(.)", r"\1", label[1:-1])


def test_dot_has_the_same_nodes_and_edges_as_mermaid() -> None:
    nodes, edges = dot_parts(to_dot(sample()))
    assert len(nodes) == 8
    assert len(edges) == 2 + 4
    assert sum(1 for edge in edges if edge["style"]) == 4
    labels = {dot_unquote(match["label"]): match["style"] for match in nodes}
    assert labels["root user: hello"] == ""
    assert "shape=ellipse" in labels["branch: main (active)"]
    assert "shape=hexagon" in labels["checkpoint: retry"]


def test_dot_labels_cannot_break_out() -> None:
    output = to_dot(hostile())
    nodes, edges = dot_parts(output)
    assert len(nodes) == 1 + 2 * len(HOSTILE) + 1
    assert len(edges) == 2 * len(HOSTILE) + 1
    labels = {dot_unquote(match["label"]) for match in nodes}
    assert 'branch: "]; drop' in labels
    assert "branch: a\\" in labels
    assert "branch: &lt;script&gt;alert(1)&lt;/script&gt;" in labels
    assert "branch: #quot; `md` {x} |y| &amp; end" in labels
    assert "<script>" not in output
    assert 'label="chat c\\"1";' in output


def test_pointers_to_missing_messages_draw_nodes_without_edges() -> None:
    graph = chat_graph(
        [node("orphan", "gone")], [branch("stale", "gone")], [checkpoint("lost", "gone")]
    )
    nodes, edges = mermaid_parts(to_mermaid(graph))
    assert (len(nodes), len(edges)) == (3, 0)
    nodes, edges = dot_parts(to_dot(graph))
    assert (len(nodes), len(edges)) == (3, 0)


def test_every_format_draws_an_empty_chat() -> None:
    graph = chat_graph([], [branch("main", None, active=True)])
    assert json.loads(to_json(graph))["messages"] == []
    assert mermaid_parts(to_mermaid(graph)) is not None
    nodes, edges = dot_parts(to_dot(graph))
    assert (len(nodes), len(edges)) == (1, 0)
