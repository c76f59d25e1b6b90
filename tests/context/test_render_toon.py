"""ToonRenderer: exact output for every rule of the TOON format (and the TOON spec)."""

from __future__ import annotations

from typing import Any

import pytest

from ctxstore.errors import ValidationError
from ctxstore.prompt.fragment import Fragment, fragment
from ctxstore.prompt.renderers import ToonRenderer
from ctxstore.prompt.renderers.toon import encode_key, encode_scalar


def render(*fragments: Fragment, group: bool = False) -> str:
    return ToonRenderer(group_fragments=group).render(fragments)


# --- primitives ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "text"),
    [
        ("Use CTEs", "Use CTEs"),
        (42, "42"),
        (-42, "-42"),
        (3.14159, "3.14159"),
        (True, "true"),
        (False, "false"),
    ],
)
def test_primitive_is_key_colon_value(data: Any, text: str) -> None:
    assert render(Fragment("value", data)) == f"value: {text}"


@pytest.mark.parametrize(
    ("number", "text"),
    [
        (1.0, "1"),
        (-0.0, "0"),
        (1.5, "1.5"),
        (1e16, "10000000000000000"),
        (1e-7, "0.0000001"),
        (-2.5e-3, "-0.0025"),
        (float("nan"), "null"),
        (float("inf"), "null"),
        (float("-inf"), "null"),
    ],
)
def test_numbers_are_canonical_decimals(number: float, text: str) -> None:
    assert encode_scalar(number) == text


@pytest.mark.parametrize(
    ("text", "encoded"),
    [
        ("", '""'),
        ("  hello", '"  hello"'),
        ("hello  ", '"hello  "'),
        ("true", '"true"'),
        ("false", '"false"'),
        ("null", '"null"'),
        ("123", '"123"'),
        ("-3.14", '"-3.14"'),
        ("1e-6", '"1e-6"'),
        ("05", '"05"'),
        ("key: value", '"key: value"'),
        ("a,b,c", '"a,b,c"'),
        ('say "hello"', r'"say \"hello\""'),
        ("[x]", '"[x]"'),
        ("{x}", '"{x}"'),
        ("-flag", '"-flag"'),
        ("-", '"-"'),
        ("C:\\Users", r'"C:\\Users"'),
        ("line1\nline2", r'"line1\nline2"'),
        ("a\rb\tc", r'"a\rb\tc"'),
        ("hello world", "hello world"),
        ("True", "True"),
        ("a-b it's", "a-b it's"),
        ("Hello 世界 👋", "Hello 世界 👋"),
    ],
)
def test_strings_are_quoted_only_when_needed(text: str, encoded: str) -> None:
    assert encode_scalar(text) == encoded
    assert render(Fragment("text", text)) == f"text: {encoded}"


@pytest.mark.parametrize(
    ("key", "encoded"),
    [
        ("name", "name"),
        ("_private", "_private"),
        ("user.name", "user.name"),
        ("my-key", '"my-key"'),
        ("date format", '"date format"'),
        ("1st", '"1st"'),
        ("名前", '"名前"'),
        ('q"', r'"q\""'),
    ],
)
def test_keys_are_quoted_unless_identifiers(key: str, encoded: str) -> None:
    assert encode_key(key) == encoded


def test_quoted_keys_in_headers_and_fields() -> None:
    out = render(Fragment("x", {"my-key": [1, 2], "rows": [{"a b": 1, "c": 2}]}))
    assert out == 'x:\n  "my-key"[2]: 1,2\n  rows[1]{"a b",c}:\n    1,2'


def test_top_level_fragments_are_joined_with_a_newline() -> None:
    assert render(Fragment("first", "one"), Fragment("second", "two")) == "first: one\nsecond: two"
    assert render() == ""


# --- objects ------------------------------------------------------------------------------------


def test_dict_is_indented_two_spaces_per_level() -> None:
    data = {"task": "hikes", "database": {"host": "localhost", "port": 5432}, "empty": {}}
    assert render(Fragment("context", data)) == (
        "context:\n  task: hikes\n  database:\n    host: localhost\n    port: 5432\n  empty:"
    )


def test_empty_dict_is_the_key_alone() -> None:
    assert render(Fragment("empty", {})) == "empty:"


# --- arrays -------------------------------------------------------------------------------------


def test_primitive_lists_are_inline_with_their_length() -> None:
    out = render(
        Fragment("tags", ["admin", "ops", "dev"]),
        Fragment("mixed", ["hello", "a,b", 42, True, ""]),
        Fragment("items", []),
    )
    assert out == 'tags[3]: admin,ops,dev\nmixed[5]: hello,"a,b",42,true,""\nitems[0]:'


def test_uniform_flat_dicts_are_a_table() -> None:
    users = [{"id": 1, "name": "Ada", "role": "admin"}, {"role": "user", "name": "Bob", "id": 2}]
    assert render(Fragment("users", users)) == (
        "users[2]{id,name,role}:\n  1,Ada,admin\n  2,Bob,user"
    )


def test_table_cells_are_quoted_like_values() -> None:
    items = [{"name": "hello", "desc": "a,b"}, {"name": "world", "desc": "c:d"}]
    assert render(Fragment("items", items)) == 'items[2]{name,desc}:\n  hello,"a,b"\n  world,"c:d"'


def test_hikes_example_from_the_spec() -> None:
    hikes = [
        {"id": 1, "name": "Blue Lake Trail", "distanceKm": 7.5, "wasSunny": True},
        {"id": 2, "name": "Ridge Overlook", "distanceKm": 9.2, "wasSunny": False},
    ]
    out = render(
        Fragment("context", {"task": "Our favorite hikes together", "season": "spring_2025"}),
        Fragment("friends", ["ana", "luis", "sam"]),
        Fragment("hikes", hikes),
    )
    assert out == (
        "context:\n"
        "  task: Our favorite hikes together\n"
        "  season: spring_2025\n"
        "friends[3]: ana,luis,sam\n"
        "hikes[2]{id,name,distanceKm,wasSunny}:\n"
        "  1,Blue Lake Trail,7.5,true\n"
        "  2,Ridge Overlook,9.2,false"
    )


def test_dicts_with_different_keys_are_list_items() -> None:
    items = [{"a": 1}, {"b": 2}, {"a": 3, "b": None}]
    assert render(Fragment("items", items)) == "items[3]:\n  - a: 1\n  - b: 2\n  - a: 3"


def test_list_item_object_has_its_first_field_on_the_hyphen_line() -> None:
    items = [
        {"name": "test", "nested": {"x": 1}},
        {"nested": {"x": 2}, "name": "other"},
        {"empty": {}, "n": 1},
        {},
    ]
    assert render(Fragment("items", items)) == (
        "items[4]:\n"
        "  - name: test\n"
        "    nested:\n"
        "      x: 1\n"
        "  - nested:\n"
        "      x: 2\n"
        "    name: other\n"
        "  - empty:\n"
        "    n: 1\n"
        "  -"
    )


def test_table_as_first_field_of_a_list_item() -> None:
    items = [{"users": [{"id": 1, "name": "Ada"}, {"id": 2, "name": "Bob"}], "status": "active"}]
    assert render(Fragment("items", items)) == (
        "items[1]:\n  - users[2]{id,name}:\n      1,Ada\n      2,Bob\n    status: active"
    )


def test_lists_of_lists() -> None:
    out = render(
        Fragment("pairs", [["a", "b"], [], [1]]),
        Fragment("items", [{"matrix": [[1, 2], [3, 4]], "name": "grid"}]),
        Fragment("rows", [[{"x": 1}, {"x": 2}]]),
    )
    assert out == (
        "pairs[3]:\n"
        "  - [2]: a,b\n"
        "  - [0]:\n"
        "  - [1]: 1\n"
        "items[1]:\n"
        "  - matrix[2]:\n"
        "      - [2]: 1,2\n"
        "      - [2]: 3,4\n"
        "    name: grid\n"
        "rows[1]:\n"
        "  - [2]:\n"
        "    - x: 1\n"
        "    - x: 2"
    )


def test_mixed_list_keeps_item_order() -> None:
    out = render(Fragment("mix", [1, {"a": 1}, "text", Fragment("hint", "h")]))
    assert out == "mix[4]:\n  - 1\n  - a: 1\n  - text\n  - hint: h"


# --- nested fragments ---------------------------------------------------------------------------


def test_fragments_in_a_list_are_one_key_objects() -> None:
    teachings = fragment("teachings", Fragment("hint", "First"), Fragment("hint", "Second"))
    assert render(teachings) == "teachings[2]:\n  - hint: First\n  - hint: Second"


def test_deeply_nested_fragments() -> None:
    level1 = fragment("level1", fragment("level2", Fragment("level3", "deep value")))
    assert render(level1) == "level1[1]:\n  - level2[1]:\n      - level3: deep value"


def test_fragment_with_dict_data_in_a_list() -> None:
    terms = fragment("terms", Fragment("term", {"name": "LTV", "definition": "Lifetime Value"}))
    assert render(terms) == (
        "terms[1]:\n  - term:\n      name: LTV\n      definition: Lifetime Value"
    )


def test_fragment_as_data_is_a_one_key_object() -> None:
    assert render(Fragment("outer", Fragment("inner", "x"))) == "outer:\n  inner: x"


# --- group_fragments ----------------------------------------------------------------------------


def test_groups_top_level_fragments_under_the_plural_key() -> None:
    out = render(
        Fragment("hint", "First"),
        Fragment("term", {"name": "A", "definition": "a"}),
        Fragment("hint", "Second"),
        Fragment("term", {"name": "B", "definition": "b"}),
        group=True,
    )
    assert out == "hints[2]: First,Second\nterms[2]{name,definition}:\n  A,a\n  B,b"


def test_groups_child_fragments_at_the_place_of_the_first_member() -> None:
    parts = [Fragment("hint", "H1"), "x", Fragment("hint", "H2")]
    out = render(Fragment("lesson", {"parts": parts}), group=True)
    assert out == "lessons[1]:\n  - parts[2]:\n      - hints[2]: H1,H2\n      - x"


def test_does_not_group_by_default() -> None:
    assert render(Fragment("hint", "a"), Fragment("hint", "b")) == "hint: a\nhint: b"


# --- shared pre-processing ----------------------------------------------------------------------


def test_none_values_and_message_fragments_are_left_out() -> None:
    message = Fragment("user", {"role": "user"}, kind="message")
    out = render(
        message,
        Fragment("gone", None),
        Fragment("item", {"a": "value", "b": None, "c": [None, "x", message]}),
    )
    assert out == "item:\n  a: value\n  c[1]: x"


def test_rejects_lazy_data() -> None:
    with pytest.raises(ValidationError, match=r"item\.later: cannot render a value of type"):
        render(Fragment("item", {"later": lambda: 1}))
