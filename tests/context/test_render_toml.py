"""TomlRenderer: exact output for every rule of the TOML format, and output that parses."""

from __future__ import annotations

from typing import Any

import pytest

from ctxstore.errors import ValidationError
from ctxstore.prompt.fragment import Fragment, fragment
from ctxstore.prompt.renderers import TomlRenderer
from ctxstore.prompt.renderers.toml import encode_key


def render(*fragments: Fragment, group: bool = False) -> str:
    return TomlRenderer(group_fragments=group).render(fragments)


# --- primitives ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "text"),
    [
        ("Use CTEs", '"Use CTEs"'),
        ("", '""'),
        (42, "42"),
        (-42, "-42"),
        (3.14159, "3.14159"),
        (1.0, "1.0"),
        (float("inf"), "inf"),
        (True, "true"),
        (False, "false"),
    ],
)
def test_primitive_is_a_key_value_pair(data: Any, text: str) -> None:
    assert render(Fragment("value", data)) == f"value = {text}"


@pytest.mark.parametrize(
    ("data", "text"),
    [
        ("C:\\Users\\test", r'"C:\\Users\\test"'),
        ('say "hello"', r'"say \"hello\""'),
        ("line1\nline2\r\n", r'"line1\nline2\r\n"'),
        ("a\tb\bc\fd", r'"a\tb\bc\fd"'),
        ("bell\x07 del\x7f", r'"bell\u0007 del\u007F"'),
        ("你好 🌍", '"你好 🌍"'),
    ],
)
def test_strings_are_escaped_as_basic_strings(data: str, text: str) -> None:
    assert render(Fragment("text", data)) == f"text = {text}"


def test_top_level_fragments_are_joined_with_a_blank_line() -> None:
    assert render(Fragment("first", "one"), Fragment("second", "two")) == (
        'first = "one"\n\nsecond = "two"'
    )
    assert render() == ""


# --- lists --------------------------------------------------------------------------------------


def test_lists_of_primitives_are_inline() -> None:
    out = render(Fragment("items", ["one", 'q"', 2, True]), Fragment("empty", []))
    assert out == 'items = ["one", "q\\"", 2, true]\n\nempty = []'


def test_list_of_dicts_is_an_array_of_tables() -> None:
    out = render(Fragment("users", [{"id": 1, "name": "Ada"}, {"id": 2}]))
    assert out == '[[users]]\nid = 1\nname = "Ada"\n\n[[users]]\nid = 2'


def test_other_lists_hold_inline_tables_and_arrays() -> None:
    out = render(Fragment("mixed", ["a", {"b": 1, "c d": {}}, [1, [2]]]))
    assert out == 'mixed = ["a", {b = 1, "c d" = {}}, [1, [2]]]'


# --- tables -------------------------------------------------------------------------------------


def test_dict_is_a_section() -> None:
    out = render(Fragment("term", {"name": "LTV", "definition": "Lifetime Value"}))
    assert out == '[term]\nname = "LTV"\ndefinition = "Lifetime Value"'


def test_nested_dicts_are_dotted_sections() -> None:
    out = render(Fragment("config", {"database": {"host": "localhost", "port": 5432}}))
    assert out == '[config]\n\n[config.database]\nhost = "localhost"\nport = 5432'


def test_empty_dict_is_an_empty_section() -> None:
    assert render(Fragment("empty", {})) == "[empty]"
    assert render(Fragment("a", {"b": {}})) == "[a]\n\n[a.b]"


def test_plain_values_come_before_sub_tables_in_their_own_order() -> None:
    data = {"z": 1, "database": {"host": "h"}, "name": "x", "tags": ["t"]}
    assert render(Fragment("config", data)) == (
        '[config]\nz = 1\nname = "x"\ntags = ["t"]\n\n[config.database]\nhost = "h"'
    )


def test_plain_top_level_fragments_come_before_sections() -> None:
    out = render(Fragment("term", {"name": "MRR"}), Fragment("hint", "h"), Fragment("n", 1))
    assert out == 'hint = "h"\n\nn = 1\n\n[term]\nname = "MRR"'


def test_keys_that_are_not_bare_are_quoted() -> None:
    data = {"date format": "ISO", "名前": "test", "a.b": 1, "ok-key_9": 2, 'q"': 3}
    assert render(Fragment("style guide", {"nested": data})) == (
        '["style guide"]\n\n'
        '["style guide".nested]\n'
        '"date format" = "ISO"\n'
        '"名前" = "test"\n'
        '"a.b" = 1\n'
        "ok-key_9 = 2\n"
        '"q\\"" = 3'
    )


@pytest.mark.parametrize(
    ("key", "encoded"), [("plain", "plain"), ("A-z_0", "A-z_0"), ("", '""'), ("a b", '"a b"')]
)
def test_encode_key(key: str, encoded: str) -> None:
    assert encode_key(key) == encoded


# --- nested fragments ---------------------------------------------------------------------------


def test_list_of_fragments_is_a_table() -> None:
    out = render(fragment("container", Fragment("hint", "Use CTEs"), Fragment("limit", 10)))
    assert out == '[container]\nhint = "Use CTEs"\nlimit = 10'


def test_deeply_nested_fragments_are_dotted_sections() -> None:
    level1 = fragment("level1", fragment("level2", Fragment("level3", "deep value")))
    assert render(level1) == '[level1]\n\n[level1.level2]\nlevel3 = "deep value"'


def test_fragment_as_data_is_a_one_key_table() -> None:
    out = render(Fragment("outer", Fragment("term", {"name": "LTV"})))
    assert out == '[outer]\n\n[outer.term]\nname = "LTV"'


def test_repeated_names_collect_their_data_in_a_list() -> None:
    teachings = fragment(
        "teachings",
        Fragment("hint", "First"),
        Fragment("term", {"name": "A"}),
        Fragment("hint", "Second"),
        Fragment("term", {"name": "B"}),
    )
    assert render(teachings) == (
        '[teachings]\nhint = ["First", "Second"]\n\n'
        '[[teachings.term]]\nname = "A"\n\n'
        '[[teachings.term]]\nname = "B"'
    )


def test_fragments_mixed_with_values_are_one_key_inline_tables() -> None:
    out = render(fragment("rules", "be brief", Fragment("hint", "cite")))
    assert out == 'rules = ["be brief", {hint = "cite"}]'


# --- group_fragments ----------------------------------------------------------------------------


def test_groups_fragments_under_the_plural_key() -> None:
    out = render(
        Fragment("hint", "First"),
        Fragment("term", {"name": "MRR"}),
        Fragment("hint", "Second"),
        fragment("box", Fragment("query", "q")),
        group=True,
    )
    assert out == (
        'hints = ["First", "Second"]\n\n[[terms]]\nname = "MRR"\n\n[[boxes]]\nqueries = ["q"]'
    )


def test_does_not_group_by_default() -> None:
    assert render(Fragment("hint", "a")) == 'hint = "a"'


# --- shared pre-processing ----------------------------------------------------------------------


def test_none_values_and_message_fragments_are_left_out() -> None:
    message = Fragment("user", {"role": "user"}, kind="message")
    out = render(
        message,
        Fragment("gone", None),
        Fragment("item", {"a": "value", "b": None, "c": ["x", None], "m": message}),
    )
    assert out == '[item]\na = "value"\nc = ["x"]'


def test_rejects_lazy_data() -> None:
    with pytest.raises(ValidationError, match=r"item\[0\]: cannot render a value of type"):
        render(Fragment("item", [iter([1])]))


# --- the output is TOML -------------------------------------------------------------------------

RICH_INPUTS: list[tuple[list[Fragment], bool, dict[str, Any]]] = [
    (
        [
            Fragment("role", 'You are a SQL expert.\nAnswer with "quoted" \\ text.\t\x01'),
            Fragment("term", {"name": "MRR", "definition": "monthly recurring revenue"}),
            Fragment("hint", "a"),
            Fragment("hint", "b"),
            Fragment("config", {"db": {"host": "h", "port": 5432}, "after": True, "x y": {}}),
            Fragment("users", [{"id": 1, "tags": ["a"]}, {"id": 2, "meta": {"k": "v"}}]),
        ],
        False,
        {
            "role": 'You are a SQL expert.\nAnswer with "quoted" \\ text.\t\x01',
            "hint": ["a", "b"],
            "term": {"name": "MRR", "definition": "monthly recurring revenue"},
            "config": {"db": {"host": "h", "port": 5432}, "after": True, "x y": {}},
            "users": [{"id": 1, "tags": ["a"]}, {"id": 2, "meta": {"k": "v"}}],
        },
    ),
    (
        [
            fragment(
                "teachings",
                Fragment("hint", "h1"),
                Fragment("term", {"名前": "x", "a.b": [1, 2.5, {"c": None, "d": "e"}]}),
                Fragment("hint", "h2"),
                fragment("nested", Fragment("deep", {"": "empty key"})),
            ),
            Fragment("mixed", ["s", {"k": [1, [2]]}, fragment("f", 1)]),
        ],
        False,
        {
            "mixed": ["s", {"k": [1, [2]]}, {"f": [1]}],
            "teachings": {
                "hint": ["h1", "h2"],
                "term": {"名前": "x", "a.b": [1, 2.5, {"d": "e"}]},
                "nested": {"deep": {"": "empty key"}},
            },
        },
    ),
    (
        [
            Fragment("term", {"name": "A"}),
            Fragment("hint", "h"),
            Fragment("term", {"name": "B", "sub": {"x": 1}}),
            fragment("box", Fragment("query", "q"), Fragment("query", {"sql": "SELECT 1"})),
        ],
        True,
        {
            "hints": ["h"],
            "terms": [{"name": "A"}, {"name": "B", "sub": {"x": 1}}],
            "boxes": [{"queries": ["q", {"sql": "SELECT 1"}]}],
        },
    ),
]


@pytest.mark.parametrize(("fragments", "group", "expected"), RICH_INPUTS)
def test_output_parses_back_to_the_data(
    fragments: list[Fragment], group: bool, expected: dict[str, Any]
) -> None:
    tomllib = pytest.importorskip("tomllib")
    assert tomllib.loads(render(*fragments, group=group)) == expected
