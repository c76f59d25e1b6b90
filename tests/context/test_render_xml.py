"""XmlRenderer: exact output for every rule of the XML format and the shared pre-processing."""

from __future__ import annotations

from typing import Any

import pytest

from ctxstore.errors import ValidationError
from ctxstore.prompt.fragment import Fragment, fragment
from ctxstore.prompt.renderers import Renderer, XmlRenderer
from ctxstore.prompt.renderers.xml import tag_name


def render(*fragments: Fragment, group: bool = False) -> str:
    return XmlRenderer(group_fragments=group).render(fragments)


# --- values -------------------------------------------------------------------------------------


def test_primitive_renders_between_tags() -> None:
    assert render(Fragment("hint", "Use CTEs")) == "<hint>Use CTEs</hint>"


@pytest.mark.parametrize(
    ("data", "text"),
    [(42, "42"), (-1.5, "-1.5"), (True, "true"), (False, "false"), ("", "")],
)
def test_scalars(data: Any, text: str) -> None:
    assert render(Fragment("v", data)) == f"<v>{text}</v>"


def test_escapes_the_five_special_characters_in_text() -> None:
    out = render(Fragment("q", """a & b < c > d "e" 'f'"""))
    assert out == "<q>a &amp; b &lt; c &gt; d &quot;e&quot; &apos;f&apos;</q>"


def test_escapes_text_in_nested_values_and_list_items() -> None:
    out = render(Fragment("rule", {"when": "x<y", "tags": ["a&b"]}))
    assert out == (
        "<rule>\n  <when>x&lt;y</when>\n  <tags>\n    <tag>a&amp;b</tag>\n  </tags>\n</rule>"
    )


def test_multi_line_value_goes_on_indented_lines_between_the_tags() -> None:
    out = render(Fragment("role", "You are helpful.\n\nBe brief."))
    assert out == "<role>\n  You are helpful.\n\n  Be brief.\n</role>"


def test_nested_multi_line_value_is_indented_one_level_deeper_than_its_tags() -> None:
    out = render(Fragment("example", {"sql": "SELECT 1\r\nFROM t"}))
    assert out == "<example>\n  <sql>\n    SELECT 1\n    FROM t\n  </sql>\n</example>"


# --- structure ----------------------------------------------------------------------------------


def test_dict_becomes_one_child_per_key_indented_two_spaces_per_level() -> None:
    data = {"name": "MRR", "meta": {"source": {"table": "billing"}}, "active": True}
    out = render(Fragment("term", data))
    assert out == (
        "<term>\n"
        "  <name>MRR</name>\n"
        "  <meta>\n"
        "    <source>\n"
        "      <table>billing</table>\n"
        "    </source>\n"
        "  </meta>\n"
        "  <active>true</active>\n"
        "</term>"
    )


@pytest.mark.parametrize(
    ("name", "item"), [("items", "item"), ("categories", "category"), ("queries", "query")]
)
def test_list_items_are_tagged_with_the_singular_of_the_name(name: str, item: str) -> None:
    out = render(Fragment(name, ["b", "a"]))
    assert out == f"<{name}>\n  <{item}>b</{item}>\n  <{item}>a</{item}>\n</{name}>"


def test_list_of_dicts_and_nested_lists() -> None:
    out = render(Fragment("users", [{"id": 1}, ["x"]]))
    assert out == (
        "<users>\n"
        "  <user>\n"
        "    <id>1</id>\n"
        "  </user>\n"
        "  <user>\n"
        "    <user>x</user>\n"
        "  </user>\n"
        "</users>"
    )


def test_workflow_from_the_reference_readme() -> None:
    out = render(Fragment("workflow", {"task": "Analysis", "steps": ["step1", "step2", "step3"]}))
    assert out == (
        "<workflow>\n"
        "  <task>Analysis</task>\n"
        "  <steps>\n"
        "    <step>step1</step>\n"
        "    <step>step2</step>\n"
        "    <step>step3</step>\n"
        "  </steps>\n"
        "</workflow>"
    )


def test_empty_lists_and_dicts_render_nothing() -> None:
    data = {"steps": [], "meta": {}, "deep": {"inner": [None]}, "task": "x"}
    assert render(Fragment("workflow", data)) == "<workflow>\n  <task>x</task>\n</workflow>"
    assert render(Fragment("a", []), Fragment("b", {}), Fragment("c", "kept")) == "<c>kept</c>"


def test_nested_fragments_render_as_nested_tags() -> None:
    database = Fragment(
        "database",
        [
            Fragment("host", "localhost"),
            Fragment("settings", [Fragment("timeout", 30), Fragment("retry", True)]),
        ],
    )
    assert render(database) == (
        "<database>\n"
        "  <host>localhost</host>\n"
        "  <settings>\n"
        "    <timeout>30</timeout>\n"
        "    <retry>true</retry>\n"
        "  </settings>\n"
        "</database>"
    )


def test_fragment_as_data_and_in_dicts() -> None:
    out = render(Fragment("outer", Fragment("inner", {"k": Fragment("leaf", 1)})))
    assert out == (
        "<outer>\n  <inner>\n    <k>\n      <leaf>1</leaf>\n    </k>\n  </inner>\n</outer>"
    )


def test_fragment_helper_children_are_list_items() -> None:
    out = render(fragment("rules", "be brief", Fragment("hint", "cite")))
    assert out == "<rules>\n  <rule>be brief</rule>\n  <hint>cite</hint>\n</rules>"


def test_items_and_keys_keep_their_order() -> None:
    out = render(Fragment("mix", ["z", Fragment("hint", "h"), "a", {"b": 1, "a": 2}]))
    assert out == (
        "<mix>\n"
        "  <mix>z</mix>\n"
        "  <hint>h</hint>\n"
        "  <mix>a</mix>\n"
        "  <mix>\n"
        "    <b>1</b>\n"
        "    <a>2</a>\n"
        "  </mix>\n"
        "</mix>"
    )


def test_top_level_fragments_are_joined_with_a_newline() -> None:
    assert render(Fragment("a", "1"), Fragment("b", "2")) == "<a>1</a>\n<b>2</b>"
    assert render() == ""


@pytest.mark.parametrize(
    ("name", "tag"),
    [
        ("style_guide", "style_guide"),
        ("date format", "date_format"),
        ("revenue (gross)", "revenue_gross"),
        ("1st", "_1st"),
        ("a<b>", "a_b"),
        ("名前", "名前"),
    ],
)
def test_names_that_are_not_xml_names_are_made_valid(name: str, tag: str) -> None:
    assert tag_name(name) == tag
    assert render(Fragment("g", {name: "v"})) == f"<g>\n  <{tag}>v</{tag}>\n</g>"


# --- group_fragments ----------------------------------------------------------------------------


def test_groups_top_level_fragments_as_in_the_reference_readme() -> None:
    fragments = [
        Fragment("term", {"name": "MRR", "definition": "monthly recurring revenue"}),
        Fragment("hint", "Always exclude test accounts"),
        Fragment(
            "guardrail",
            {
                "rule": "Never expose PII",
                "reason": "Privacy compliance",
                "action": "Return aggregates instead",
            },
        ),
    ]
    assert render(*fragments, group=True) == (
        "<terms>\n"
        "  <term>\n"
        "    <name>MRR</name>\n"
        "    <definition>monthly recurring revenue</definition>\n"
        "  </term>\n"
        "</terms>\n"
        "<hints>\n"
        "  <hint>Always exclude test accounts</hint>\n"
        "</hints>\n"
        "<guardrails>\n"
        "  <guardrail>\n"
        "    <rule>Never expose PII</rule>\n"
        "    <reason>Privacy compliance</reason>\n"
        "    <action>Return aggregates instead</action>\n"
        "  </guardrail>\n"
        "</guardrails>"
    )


def test_groups_child_fragments_at_the_place_of_the_first_member() -> None:
    lesson = fragment(
        "lesson",
        "intro",
        Fragment("hint", "H1"),
        Fragment("query", "Q1"),
        Fragment("hint", "H2"),
        "outro",
    )
    assert render(lesson, group=True) == (
        "<lessons>\n"
        "  <lesson>\n"
        "    <lesson>intro</lesson>\n"
        "    <hints>\n"
        "      <hint>H1</hint>\n"
        "      <hint>H2</hint>\n"
        "    </hints>\n"
        "    <queries>\n"
        "      <query>Q1</query>\n"
        "    </queries>\n"
        "    <lesson>outro</lesson>\n"
        "  </lesson>\n"
        "</lessons>"
    )


def test_does_not_group_by_default() -> None:
    out = render(Fragment("hint", "a"), Fragment("hint", "b"))
    assert out == "<hint>a</hint>\n<hint>b</hint>"


# --- shared pre-processing ----------------------------------------------------------------------


def test_none_is_dropped_everywhere() -> None:
    data = {"a": None, "b": [None, "x", None], "c": Fragment("gone", None)}
    out = render(Fragment("skip", None), Fragment("keep", data))
    assert out == "<keep>\n  <b>\n    <b>x</b>\n  </b>\n</keep>"


def test_message_fragments_never_render() -> None:
    message = Fragment("user", {"role": "user", "content": "hi"}, kind="message")
    out = render(
        message,
        Fragment("box", [message, "x", {"m": message}]),
        Fragment("wrap", message),
    )
    assert out == "<box>\n  <box>x</box>\n</box>"


def test_renderer_is_an_abstract_base_with_the_group_option() -> None:
    renderer = XmlRenderer(group_fragments=True)
    assert isinstance(renderer, Renderer)
    assert renderer.group_fragments is True
    assert XmlRenderer().group_fragments is False
    with pytest.raises(TypeError):
        Renderer()  # type: ignore[abstract]


def test_does_not_change_its_input() -> None:
    source = Fragment("keep", {"a": None, "b": [None, 1]})
    render(source)
    assert source == Fragment("keep", {"a": None, "b": [None, 1]})


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (lambda: "lazy", r"keep: cannot render a value of type function"),
        ({"x": {1, 2}}, r"keep\.x: cannot render a value of type set"),
        ([1, Fragment("f", [object()])], r"keep\[1\]\.f\[0\]: cannot render .* object"),
        ({1: "a"}, r"keep: dict keys must be strings"),
    ],
)
def test_rejects_data_that_is_not_a_plain_tree(data: Any, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        render(Fragment("keep", data))


def test_rejects_data_that_contains_itself() -> None:
    loop: list[Any] = ["a"]
    loop.append(loop)
    with pytest.raises(ValidationError, match=r"keep\[1\]: the data contains itself"):
        render(Fragment("keep", loop))


def test_rejects_input_that_is_not_fragments() -> None:
    with pytest.raises(ValidationError, match="not one fragment"):
        XmlRenderer().render(Fragment("a", "b"))  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="got str at position 1"):
        XmlRenderer().render([Fragment("a", "b"), "c"])  # type: ignore[list-item]


def test_accepts_any_iterable_and_plain_values_of_subclasses() -> None:
    class Text(str):
        def __str__(self) -> str:
            return "overridden"

    out = XmlRenderer().render(f for f in [Fragment("a", Text("plain")), Fragment("b", "c")])
    assert out == "<a>plain</a>\n<b>c</b>"


def test_grouping_never_repeats_a_name() -> None:
    """A wrapper named like the list it sits in, or like its members, would say nothing."""
    principle = Fragment(
        "principle",
        {"policies": [Fragment("policy", "a"), "plain", Fragment("policy", "b")]},
    )
    out = XmlRenderer(group_fragments=True).render([principle])
    assert "<policies>\n      <policies>" not in out
    assert out.count("<policies>") == 1
    assert out.index(">a<") < out.index(">plain<") < out.index(">b<")  # order kept
    rules = Fragment("rules", [Fragment("hint", "x")])
    assert XmlRenderer(group_fragments=True).render([rules]).startswith("<rules>\n  <hints>")
