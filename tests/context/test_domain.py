"""Domain fragment builders: names, data shapes, dropped empty fields, and input checks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from ctxstore.errors import ValidationError
from ctxstore.prompt.domain import (
    clarification,
    example,
    explain,
    glossary,
    guardrail,
    hint,
    policy,
    principle,
    quirk,
    role,
    style_guide,
    term,
    workflow,
)
from ctxstore.prompt.fragment import Fragment, fragment
from ctxstore.prompt.messages import user


def test_role_and_hint_hold_their_text() -> None:
    assert role("You are an analyst.") == Fragment("role", "You are an analyst.")
    assert hint("Exclude test accounts") == Fragment("hint", "Exclude test accounts")


def test_term() -> None:
    assert term("MRR", "monthly recurring revenue") == Fragment(
        "term", {"name": "MRR", "definition": "monthly recurring revenue"}
    )


@pytest.mark.parametrize(
    ("built", "expected"),
    [
        (
            guardrail("No PII", reason="privacy", action="aggregate"),
            Fragment("guardrail", {"rule": "No PII", "reason": "privacy", "action": "aggregate"}),
        ),
        (guardrail("No PII"), Fragment("guardrail", {"rule": "No PII"})),
        (
            example("q?", "a.", note="n"),
            Fragment("example", {"question": "q?", "answer": "a.", "note": "n"}),
        ),
        (example("q?", "a."), Fragment("example", {"question": "q?", "answer": "a."})),
        (
            explain("churn", "a leaky bucket", therefore="count leavers"),
            Fragment(
                "explain",
                {"concept": "churn", "explanation": "a leaky bucket", "therefore": "count leavers"},
            ),
        ),
        (
            explain("churn", "a leaky bucket"),
            Fragment("explain", {"concept": "churn", "explanation": "a leaky bucket"}),
        ),
        (
            clarification("asked for rate", "which rate?", "there are three"),
            Fragment(
                "clarification",
                {"when": "asked for rate", "ask": "which rate?", "reason": "there are three"},
            ),
        ),
        (
            quirk("ids lose zeros", "pad them"),
            Fragment("quirk", {"issue": "ids lose zeros", "workaround": "pad them"}),
        ),
        (
            style_guide("CTEs", never="subqueries", always="aliases"),
            Fragment("styleGuide", {"prefer": "CTEs", "never": "subqueries", "always": "aliases"}),
        ),
        (style_guide("CTEs"), Fragment("styleGuide", {"prefer": "CTEs"})),
    ],
)
def test_text_records(built: Fragment, expected: Fragment) -> None:
    assert built == expected


def test_workflow_full_and_minimal() -> None:
    assert workflow("Loss ratio", ["sum claims", "divide"], triggers=["loss"], notes="n") == (
        Fragment(
            "workflow",
            {
                "task": "Loss ratio",
                "steps": ["sum claims", "divide"],
                "triggers": ["loss"],
                "notes": "n",
            },
        )
    )
    assert workflow("Loss ratio", ("one step",)) == Fragment(
        "workflow", {"task": "Loss ratio", "steps": ["one step"]}
    )


def test_workflow_keeps_its_own_copy_of_the_lists() -> None:
    steps = ["a"]
    triggers = ["t"]
    built = workflow("task", steps, triggers=triggers)
    steps.append("b")
    triggers.append("u")
    assert built.data == {"task": "task", "steps": ["a"], "triggers": ["t"]}


@pytest.mark.parametrize(
    "built",
    [
        guardrail("r", reason=None, action=""),
        guardrail("r", reason="  ", action=None),
    ],
)
def test_empty_optional_text_is_left_out(built: Fragment) -> None:
    assert built.data == {"rule": "r"}


def test_empty_optional_lists_are_left_out() -> None:
    assert workflow("t", ["s"], triggers=[], notes="").data == {"task": "t", "steps": ["s"]}
    assert principle("p", "d", policies=[]).data == {"title": "p", "description": "d"}
    assert policy("r", before="", reason=None, policies=()).data == {"rule": "r"}


def test_principle_nests_policies_to_any_depth() -> None:
    inner = policy("never drop tables", reason="data loss")
    middle = policy("review migrations", before="deploying", policies=[inner, "ask a DBA"])
    built = principle("Safety", "Do no harm", policies=[middle, "log everything"])
    assert built == Fragment(
        "principle",
        {
            "title": "Safety",
            "description": "Do no harm",
            "policies": [
                Fragment(
                    "policy",
                    {
                        "rule": "review migrations",
                        "before": "deploying",
                        "policies": [
                            Fragment(
                                "policy", {"rule": "never drop tables", "reason": "data loss"}
                            ),
                            "ask a DBA",
                        ],
                    },
                ),
                "log everything",
            ],
        },
    )


def test_policies_accept_any_prompt_fragment() -> None:
    nested = fragment("note", "x")
    assert policy("r", policies=[nested]).data == {"rule": "r", "policies": [nested]}


def test_glossary_lists_entries_in_mapping_order() -> None:
    assert glossary({"revenue": "SUM(amount)", "aov": "AVG(amount)"}) == Fragment(
        "glossary",
        [
            {"term": "revenue", "expression": "SUM(amount)"},
            {"term": "aov", "expression": "AVG(amount)"},
        ],
    )


_BAD_CALLS: list[tuple[str, Callable[[], Any], str]] = [
    ("role None", lambda: role(None), "role.text"),  # type: ignore[arg-type]
    ("role blank", lambda: role("  "), "role.text"),
    ("hint int", lambda: hint(3), "hint.text"),  # type: ignore[arg-type]
    ("term name empty", lambda: term("", "d"), "term.name"),
    ("term definition None", lambda: term("n", None), "term.definition"),  # type: ignore[arg-type]
    ("guardrail rule missing", lambda: guardrail(""), "guardrail.rule"),
    ("guardrail reason int", lambda: guardrail("r", reason=1), "guardrail.reason"),  # type: ignore[arg-type]
    ("example answer blank", lambda: example("q", " "), "example.answer"),
    ("example note list", lambda: example("q", "a", note=["n"]), "example.note"),  # type: ignore[arg-type]
    ("explain concept None", lambda: explain(None, "e"), "explain.concept"),  # type: ignore[arg-type]
    ("clarification reason empty", lambda: clarification("w", "a", ""), "clarification.reason"),
    ("quirk workaround int", lambda: quirk("i", 0), "quirk.workaround"),  # type: ignore[arg-type]
    ("style prefer empty", lambda: style_guide(""), "styleGuide.prefer"),
    ("style never int", lambda: style_guide("p", never=1), "styleGuide.never"),  # type: ignore[arg-type]
    ("workflow task empty", lambda: workflow("", ["s"]), "workflow.task"),
    ("workflow no steps", lambda: workflow("t", []), "at least one step"),
    ("workflow steps string", lambda: workflow("t", "step"), "workflow.steps must be a list"),
    ("workflow step int", lambda: workflow("t", ["a", 2]), r"workflow.steps\[1\]"),  # type: ignore[list-item]
    ("workflow trigger blank", lambda: workflow("t", ["s"], triggers=[""]), r"triggers\[0\]"),
    ("workflow notes int", lambda: workflow("t", ["s"], notes=5), "workflow.notes"),  # type: ignore[arg-type]
    ("principle title empty", lambda: principle("", "d"), "principle.title"),
    ("principle policies str", lambda: principle("t", "d", policies="p"), "must be a list"),
    ("principle policy int", lambda: principle("t", "d", policies=[1]), r"policies\[0\]"),  # type: ignore[list-item]
    ("policy message inside", lambda: policy("r", policies=[user("hi")]), r"policies\[0\]"),
    ("policy blank sub-rule", lambda: policy("r", policies=[" "]), r"policies\[0\]"),
    ("policy before int", lambda: policy("r", before=1), "policy.before"),  # type: ignore[arg-type]
    ("glossary empty", lambda: glossary({}), "non-empty mapping"),
    ("glossary list", lambda: glossary([("a", "b")]), "non-empty mapping"),  # type: ignore[arg-type]
    ("glossary blank term", lambda: glossary({"": "x"}), "glossary term"),
    ("glossary int expression", lambda: glossary({"a": 1}), r"glossary\['a'\]"),  # type: ignore[dict-item]
]


@pytest.mark.parametrize(
    ("call", "message"), [(c, m) for _, c, m in _BAD_CALLS], ids=[i for i, _, _ in _BAD_CALLS]
)
def test_bad_input_is_a_validation_error(call: Callable[[], Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        call()
