"""Serialized fragments: exact forms, round trips through JSON, the registry, and bad input."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from ctxstore.errors import ValidationError
from ctxstore.prompt import domain, serialization
from ctxstore.prompt.fragment import Fragment, fragment
from ctxstore.prompt.messages import assistant, last_assistant_message, message, user
from ctxstore.prompt.serialization import (
    from_fragment,
    register_fragment_type,
    registered_fragment_types,
    to_fragment,
    unregister_fragment_type,
)
from ctxstore.prompt.user_context import alias, correction, identity, persona, preference

FULL = [
    domain.role("You are an analyst."),
    domain.hint("Exclude test accounts"),
    domain.term("MRR", "monthly recurring revenue"),
    domain.guardrail("No PII", reason="privacy", action="aggregate"),
    domain.example("q?", "a.", note="n"),
    domain.explain("churn", "a leaky bucket", therefore="count leavers"),
    domain.clarification("asked for rate", "which rate?", "there are three"),
    domain.workflow("Loss ratio", ["sum", "divide"], triggers=["loss"], notes="n"),
    domain.quirk("ids lose zeros", "pad them"),
    domain.style_guide("CTEs", never="subqueries", always="aliases"),
    domain.principle(
        "Safety",
        "Do no harm",
        policies=[
            domain.policy(
                "review migrations",
                before="deploying",
                reason="outages",
                policies=[domain.policy("never drop tables", policies=["ask a DBA"]), "log it"],
            ),
            "be careful",
        ],
    ),
    domain.policy("r", before="b", reason="why", policies=[domain.policy("sub")]),
    domain.glossary({"revenue": "SUM(amount)", "aov": "AVG(amount)"}),
    identity(name="John", role="VP"),
    persona("Freya", role="assistant", objective="answer", tone="warm"),
    alias("the big table", "orders"),
    preference("date format", "YYYY-MM-DD"),
    correction("status", "1 = active"),
]

MINIMAL = [
    domain.guardrail("No PII"),
    domain.example("q?", "a."),
    domain.explain("churn", "a leaky bucket"),
    domain.workflow("Loss ratio", ["sum"]),
    domain.style_guide("CTEs"),
    domain.principle("Safety", "Do no harm"),
    domain.policy("r"),
    domain.glossary({"revenue": "SUM(amount)"}),
    identity(role="VP"),
    identity(name="John"),
    persona("Freya"),
]


@pytest.fixture(autouse=True)
def _clean_registry() -> Iterator[None]:
    yield
    for name in list(serialization._custom):
        unregister_fragment_type(name)


def test_every_builtin_type_is_covered_by_the_round_trip_cases() -> None:
    covered = {from_fragment(item)["type"] for item in FULL}
    assert covered == set(registered_fragment_types()) - {"fragment"}


@pytest.mark.parametrize("item", FULL + MINIMAL, ids=lambda f: f"{f.name}")
def test_builtins_round_trip_through_json(item: Fragment) -> None:
    serialized = from_fragment(item)
    assert serialized["type"] == item.name
    assert to_fragment(serialized) == item
    assert to_fragment(json.loads(json.dumps(serialized))) == item


@pytest.mark.parametrize(
    ("item", "expected"),
    [
        (
            domain.term("MRR", "monthly recurring revenue"),
            {"type": "term", "name": "MRR", "definition": "monthly recurring revenue"},
        ),
        (domain.hint("x"), {"type": "hint", "text": "x"}),
        (domain.role("You are an analyst."), {"type": "role", "content": "You are an analyst."}),
        (
            domain.glossary({"revenue": "SUM(amount)"}),
            {"type": "glossary", "entries": {"revenue": "SUM(amount)"}},
        ),
        (domain.style_guide("CTEs"), {"type": "styleGuide", "prefer": "CTEs"}),
        (domain.guardrail("No PII", reason=""), {"type": "guardrail", "rule": "No PII"}),
        (
            domain.workflow("t", ["a"], triggers=["go"]),
            {"type": "workflow", "task": "t", "steps": ["a"], "triggers": ["go"]},
        ),
        (
            domain.principle(
                "P", "D", policies=[domain.policy("r", policies=[domain.policy("s")]), "plain"]
            ),
            {
                "type": "principle",
                "title": "P",
                "description": "D",
                "policies": [
                    {"type": "policy", "rule": "r", "policies": [{"type": "policy", "rule": "s"}]},
                    "plain",
                ],
            },
        ),
        (persona("Freya", tone="warm"), {"type": "persona", "name": "Freya", "tone": "warm"}),
    ],
)
def test_serialized_form(item: Fragment, expected: dict[str, Any]) -> None:
    assert from_fragment(item) == expected


def test_plain_fragment_takes_the_generic_form() -> None:
    item = fragment("database", fragment("host", "localhost"), 5, None, True, {"a": [1.5]})
    serialized = from_fragment(item)
    assert serialized == {
        "type": "fragment",
        "name": "database",
        "data": [
            {"type": "fragment", "name": "host", "data": ["localhost"]},
            5,
            None,
            True,
            {"a": [1.5]},
        ],
    }
    assert to_fragment(json.loads(json.dumps(serialized))) == item


def test_builtins_nested_in_plain_fragments_keep_their_type() -> None:
    item = fragment("rules", domain.hint("x"), domain.term("a", "b"))
    serialized = from_fragment(item)
    assert serialized["data"] == [
        {"type": "hint", "text": "x"},
        {"type": "term", "name": "a", "definition": "b"},
    ]
    assert to_fragment(serialized) == item


def test_dicts_with_a_type_key_are_wrapped_so_they_stay_dicts() -> None:
    item = Fragment("config", {"type": "term", "nested": {"type": "dict", "value": 1}})
    serialized = from_fragment(item)
    assert serialized["data"] == {
        "type": "dict",
        "value": {
            "type": "term",
            "nested": {"type": "dict", "value": {"type": "dict", "value": 1}},
        },
    }
    assert to_fragment(json.loads(json.dumps(serialized))) == item


@pytest.mark.parametrize(
    "item",
    [
        Fragment("term", "just text"),
        Fragment("term", {"name": "a", "definition": "b", "extra": 1}),
        Fragment("term", {"name": "a", "definition": 3}),
        Fragment("hint", ["a list"]),
        Fragment("glossary", [{"term": "a", "expression": "x"}, {"term": "a", "expression": "y"}]),
        Fragment("glossary", [{"term": ["a"], "expression": "x"}]),
        Fragment("guardrail", {"rule": "r", "reason": ""}),
        Fragment("term", {"name": "a", "definition": "b"}, id="t1"),
        Fragment("hint", "x", metadata={"source": "admin"}),
    ],
    ids=lambda f: f"{f.name}:{f.data!r}",
)
def test_builtin_names_with_other_data_round_trip_generically(item: Fragment) -> None:
    serialized = from_fragment(item)
    assert serialized["type"] == "fragment"
    assert to_fragment(json.loads(json.dumps(serialized))) == item


def test_glossary_term_named_type_stays_an_entry() -> None:
    item = domain.glossary({"type": "the kind of account"})
    serialized = from_fragment(item)
    assert serialized == {
        "type": "glossary",
        "entries": {"type": "dict", "value": {"type": "the kind of account"}},
    }
    assert to_fragment(json.loads(json.dumps(serialized))) == item


def test_generic_form_keeps_id_kind_and_metadata() -> None:
    item = Fragment("note", "x", id="n1", kind="message", metadata={"type": "t", "k": [1]})
    assert from_fragment(item) == {
        "type": "fragment",
        "name": "note",
        "data": "x",
        "id": "n1",
        "kind": "message",
        "metadata": {"type": "dict", "value": {"type": "t", "k": [1]}},
    }
    assert to_fragment(from_fragment(item)) == item


@pytest.mark.parametrize(
    "item",
    [
        user("hi", id="u1"),
        user([{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": "u"}}]),
        assistant(
            {
                "content": None,
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ],
            }
        ),
        message({"role": "tool", "tool_call_id": "c1", "content": "42"}),
        last_assistant_message("fixed"),
    ],
    ids=["user", "parts", "tool_calls", "tool", "last_assistant"],
)
def test_message_fragments_round_trip_through_json(item: Fragment) -> None:
    assert to_fragment(json.loads(json.dumps(from_fragment(item)))) == item


def test_custom_type_round_trips_also_inside_builtins() -> None:
    register_fragment_type(
        "metric",
        to_fragment=lambda fields: Fragment("metric", {"sql": fields["sql"]}),
        from_fragment=lambda frag: {"sql": frag.data["sql"]},
    )
    item = Fragment("metric", {"sql": "SUM(x)"})
    assert from_fragment(item) == {"type": "metric", "sql": "SUM(x)"}
    assert to_fragment({"type": "metric", "sql": "SUM(x)"}) == item
    nested = domain.principle("P", "D", policies=[item])
    assert from_fragment(nested)["policies"] == [{"type": "metric", "sql": "SUM(x)"}]
    assert to_fragment(json.loads(json.dumps(from_fragment(nested)))) == nested
    assert "metric" in registered_fragment_types()


def test_custom_fields_may_hold_fragments() -> None:
    register_fragment_type(
        "box",
        to_fragment=lambda fields: Fragment("box", fields["items"]),
        from_fragment=lambda frag: {"items": frag.data},
    )
    item = Fragment("box", [domain.hint("x")])
    assert from_fragment(item) == {"type": "box", "items": [{"type": "hint", "text": "x"}]}
    assert to_fragment(from_fragment(item)) == item


def test_custom_from_fragment_returning_none_leaves_the_generic_form() -> None:
    register_fragment_type(
        "metric",
        to_fragment=lambda fields: Fragment("metric", fields["sql"]),
        from_fragment=lambda frag: {"sql": frag.data} if isinstance(frag.data, str) else None,
    )
    other = Fragment("metric", [1, 2])
    assert from_fragment(other) == {"type": "fragment", "name": "metric", "data": [1, 2]}
    assert to_fragment(from_fragment(other)) == other


def test_reregistering_needs_replace() -> None:
    def first(fields: dict[str, Any]) -> Fragment:
        return Fragment("m", 1)

    def second(fields: dict[str, Any]) -> Fragment:
        return Fragment("m", 2)

    register_fragment_type("m", to_fragment=first, from_fragment=lambda _frag: {})
    with pytest.raises(ValidationError, match="already registered"):
        register_fragment_type("m", to_fragment=second, from_fragment=lambda _frag: {})
    assert to_fragment({"type": "m"}) == Fragment("m", 1)
    register_fragment_type("m", to_fragment=second, from_fragment=lambda _frag: {}, replace=True)
    assert to_fragment({"type": "m"}) == Fragment("m", 2)
    unregister_fragment_type("m")
    with pytest.raises(ValidationError, match="unknown fragment type 'm'"):
        to_fragment({"type": "m"})


@pytest.mark.parametrize("name", ["term", "styleGuide", "fragment", "dict", "", 3])
def test_builtin_reserved_and_bad_names_cannot_be_registered(name: Any) -> None:
    with pytest.raises(ValidationError):
        register_fragment_type(
            name, to_fragment=lambda _fields: Fragment("x"), from_fragment=lambda _frag: None
        )


def test_register_needs_callables() -> None:
    with pytest.raises(ValidationError, match="callables"):
        register_fragment_type("m", to_fragment=None, from_fragment=lambda _frag: None)  # type: ignore[arg-type]


def test_unregistering_an_unknown_type_is_an_error() -> None:
    with pytest.raises(ValidationError, match="not a registered custom type"):
        unregister_fragment_type("term")


def test_custom_to_fragment_must_return_a_fragment() -> None:
    register_fragment_type("m", to_fragment=lambda _fields: "x", from_fragment=lambda _frag: None)  # type: ignore[arg-type,return-value]
    with pytest.raises(ValidationError, match="not a Fragment"):
        to_fragment({"type": "m"})


def test_custom_to_fragment_missing_field_is_a_validation_error() -> None:
    register_fragment_type(
        "m",
        to_fragment=lambda fields: Fragment("m", fields["sql"]),
        from_fragment=lambda _frag: None,
    )
    with pytest.raises(ValidationError, match="m: cannot build the fragment") as caught:
        to_fragment({"type": "m"})
    assert isinstance(caught.value.__cause__, KeyError)


def test_custom_from_fragment_may_not_claim_another_type() -> None:
    register_fragment_type(
        "m",
        to_fragment=lambda _fields: Fragment("m"),
        from_fragment=lambda _frag: {"type": "term"},
    )
    with pytest.raises(ValidationError, match="another type"):
        from_fragment(Fragment("m"))


@pytest.mark.parametrize(
    ("serialized", "message"),
    [
        ({"type": "nope"}, "unknown fragment type 'nope'"),
        ({"name": "x"}, "needs a string 'type'"),
        ({"type": 3}, "needs a string 'type'"),
        ({"type": "dict", "value": {}}, "unknown fragment type 'dict'"),
        ({"type": "term", "name": "MRR"}, "term: missing required field"),
        ({"type": "hint"}, "hint: missing required field"),
        ({"type": "glossary"}, "glossary: missing required field"),
        ({"type": "term", "name": "a", "definition": "b", "x": 1}, "term: unknown field"),
        ({"type": "term", "name": 1, "definition": "b"}, "term.name"),
        ({"type": "workflow", "task": "t", "steps": []}, "at least one step"),
        ({"type": "glossary", "entries": []}, "non-empty mapping"),
        ({"type": "policy", "rule": "r", "policies": [{"type": "bad"}]}, "'bad'"),
        ({"type": "fragment", "data": 1}, "fragment: missing required field"),
        ({"type": "fragment", "name": "n", "size": 1}, "fragment: unknown field"),
        ({"type": "fragment", "name": ""}, "non-empty string name"),
        ({"type": "fragment", "name": "n", "kind": "other"}, "kind"),
        ({"type": "fragment", "name": "n", "metadata": [1]}, "metadata must be a dict"),
        ({"type": "fragment", "name": "n", "data": {"type": "dict"}}, "wrapped dict"),
        ({"type": "fragment", "name": "n", "data": {1: "x"}}, "keys must be strings"),
        ({"type": "fragment", "name": "n", "data": {"a": {1, 2}}}, "not a JSON value"),
    ],
)
def test_bad_serialized_input(serialized: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        to_fragment(serialized)


def test_to_fragment_needs_a_mapping() -> None:
    with pytest.raises(ValidationError, match="must be a dict"):
        to_fragment([("type", "hint")])  # type: ignore[arg-type]


def test_from_fragment_needs_a_fragment() -> None:
    with pytest.raises(ValidationError, match="needs a Fragment"):
        from_fragment({"type": "hint", "text": "x"})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (lambda: "later", "materialize it first"),
        ({"a": iter([1])}, "materialize it first"),
        ({1: "x"}, "keys must be strings"),
        ({"when": {1, 2}}, "a set cannot be serialized"),
    ],
    ids=["callable", "iterator", "int key", "set"],
)
def test_unserializable_data_is_a_validation_error(data: Any, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        from_fragment(Fragment("x", data))
