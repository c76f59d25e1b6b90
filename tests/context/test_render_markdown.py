"""MarkdownRenderer: exact output for every rule of the Markdown format."""

from __future__ import annotations

from typing import Any

import pytest

from ctxstore.errors import ValidationError
from ctxstore.prompt.fragment import Fragment, fragment
from ctxstore.prompt.renderers import MarkdownRenderer
from ctxstore.prompt.renderers.base import title_case


def render(*fragments: Fragment, group: bool = False) -> str:
    return MarkdownRenderer(group_fragments=group).render(fragments)


# --- sections -----------------------------------------------------------------------------------


def test_primitive_is_the_section_body() -> None:
    assert render(Fragment("hint", "Use CTEs")) == "## Hint\nUse CTEs"


@pytest.mark.parametrize(("data", "text"), [(42, "42"), (2.5, "2.5"), (True, "true")])
def test_scalar_bodies(data: Any, text: str) -> None:
    assert render(Fragment("value", data)) == f"## Value\n{text}"


def test_multi_line_body_is_kept_as_it_is() -> None:
    assert render(Fragment("role", "Line one.\n\nLine two.")) == "## Role\nLine one.\n\nLine two."


def test_section_without_body_is_the_heading_alone() -> None:
    assert render(Fragment("empty", ""), Fragment("none", [])) == "## Empty\n\n## None"


@pytest.mark.parametrize(
    ("name", "title"),
    [
        ("style_guide", "Style Guide"),
        ("styleGuide", "Style Guide"),
        ("userAPIKey", "User API Key"),
        ("date-format", "Date Format"),
        ("hint", "Hint"),
        ("level1", "Level1"),
        ("__", "__"),
    ],
)
def test_title_case(name: str, title: str) -> None:
    assert title_case(name) == title


def test_heading_is_the_title_case_name() -> None:
    assert render(Fragment("style_guide", "x")) == "## Style Guide\nx"


def test_top_level_fragments_are_joined_with_a_blank_line() -> None:
    assert render(Fragment("first", "one"), Fragment("second", "two")) == (
        "## First\none\n\n## Second\ntwo"
    )
    assert render() == ""


# --- dicts and lists ----------------------------------------------------------------------------


def test_dict_is_a_list_of_bold_key_bullets() -> None:
    out = render(Fragment("term", {"name": "LTV", "definition": "Lifetime Value"}))
    assert out == "## Term\n- **name**: LTV\n- **definition**: Lifetime Value"


def test_nested_levels_are_indented_two_spaces() -> None:
    data = {"database": {"host": "localhost", "pool": {"size": 5}}, "debug": False}
    assert render(Fragment("config", data)) == (
        "## Config\n"
        "- **database**:\n"
        "  - **host**: localhost\n"
        "  - **pool**:\n"
        "    - **size**: 5\n"
        "- **debug**: false"
    )


def test_list_is_plain_bullets() -> None:
    assert render(Fragment("items", ["one", "two", 3])) == "## Items\n- one\n- two\n- 3"


def test_list_inside_a_dict() -> None:
    out = render(Fragment("workflow", {"task": "Report", "steps": ["pull", "sum"], "notes": []}))
    assert out == "## Workflow\n- **task**: Report\n- **steps**:\n  - pull\n  - sum\n- **notes**:"


def test_dict_and_list_items_start_their_bullets_on_the_item_line() -> None:
    out = render(Fragment("users", [{"id": 1, "name": "Ada"}, ["a", "b"], {}]))
    assert out == "## Users\n- - **id**: 1\n  - **name**: Ada\n- - a\n  - b\n-"


def test_multi_line_values_stay_inside_their_bullet() -> None:
    out = render(Fragment("example", {"sql": "SELECT 1\n\nFROM t", "tags": ["a\nb"]}))
    assert out == "## Example\n- **sql**: SELECT 1\n\n  FROM t\n- **tags**:\n  - a\n    b"


def test_no_escaping() -> None:
    out = render(Fragment("text", {"q": "SELECT * FROM `t` WHERE a<b & _x_"}))
    assert out == "## Text\n- **q**: SELECT * FROM `t` WHERE a<b & _x_"


def test_order_of_keys_and_items_is_kept() -> None:
    out = render(Fragment("mix", ["z", Fragment("hint", "h"), "a", {"b": 1, "a": 2}]))
    assert out == "## Mix\n- z\n- **hint**: h\n- a\n- - **b**: 1\n  - **a**: 2"


# --- nested fragments ---------------------------------------------------------------------------


def test_nested_fragments_are_bold_name_bullets() -> None:
    level1 = fragment("level1", fragment("level2", Fragment("level3", "deep value")), "tail")
    assert render(level1) == "## Level1\n- **level2**:\n  - **level3**: deep value\n- tail"


def test_fragment_as_data() -> None:
    out = render(Fragment("outer", Fragment("term", {"name": "LTV"})))
    assert out == "## Outer\n- **term**:\n  - **name**: LTV"


# --- group_fragments ----------------------------------------------------------------------------


def test_groups_child_fragments_under_the_title_case_plural() -> None:
    teachings = fragment(
        "teachings",
        Fragment("hint", "First"),
        Fragment("rule", "Rule 1"),
        Fragment("hint", "Second"),
    )
    assert render(teachings, group=True) == (
        "## Teachings\n"
        "- **Hints**:\n"
        "  - **hint**: First\n"
        "  - **hint**: Second\n"
        "- **Rules**:\n"
        "  - **rule**: Rule 1"
    )


def test_groups_top_level_fragments_into_one_section() -> None:
    out = render(
        Fragment("hint", "a"),
        Fragment("term", {"name": "MRR"}),
        Fragment("hint", "b"),
        group=True,
    )
    assert out == (
        "## Hints\n- **hint**: a\n- **hint**: b\n\n## Terms\n- **term**:\n  - **name**: MRR"
    )


def test_does_not_group_by_default() -> None:
    out = render(fragment("teachings", Fragment("hint", "a"), Fragment("hint", "b")))
    assert out == "## Teachings\n- **hint**: a\n- **hint**: b"


# --- shared pre-processing ----------------------------------------------------------------------


def test_none_values_and_message_fragments_are_left_out() -> None:
    message = Fragment("assistant", {"role": "assistant"}, kind="message")
    out = render(
        Fragment("gone", None),
        message,
        Fragment("item", {"a": "value", "b": None, "c": [None, "x", message]}),
    )
    assert out == "## Item\n- **a**: value\n- **c**:\n  - x"


def test_rejects_lazy_data() -> None:
    with pytest.raises(ValidationError, match=r"item\.later: cannot render a value of type"):
        render(Fragment("item", {"later": lambda: 1}))
