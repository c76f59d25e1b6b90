"""User fragment builders: names, data shapes, dropped empty fields, and input checks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from ctxstore.errors import ValidationError
from ctxstore.prompt.fragment import Fragment
from ctxstore.prompt.user_context import alias, correction, identity, persona, preference


def test_identity_keeps_what_is_given() -> None:
    assert identity(name="John", role="VP of Sales") == Fragment(
        "identity", {"name": "John", "role": "VP of Sales"}
    )
    assert identity(role="analyst") == Fragment("identity", {"role": "analyst"})
    assert identity(name="Sarah", role="") == Fragment("identity", {"name": "Sarah"})


def test_persona_full_and_minimal() -> None:
    assert persona("Freya", role="Data assistant", objective="answer", tone="warm") == Fragment(
        "persona",
        {"name": "Freya", "role": "Data assistant", "objective": "answer", "tone": "warm"},
    )
    assert persona("Freya") == Fragment("persona", {"name": "Freya"})
    assert persona("Freya", role=None, objective=" ", tone="") == Fragment(
        "persona", {"name": "Freya"}
    )


def test_pairs() -> None:
    assert alias("the big table", "orders") == Fragment(
        "alias", {"term": "the big table", "meaning": "orders"}
    )
    assert preference("date format", "YYYY-MM-DD") == Fragment(
        "preference", {"aspect": "date format", "value": "YYYY-MM-DD"}
    )
    assert correction("status", "1 = active") == Fragment(
        "correction", {"subject": "status", "clarification": "1 = active"}
    )


_BAD_CALLS: list[tuple[str, Callable[[], Any], str]] = [
    ("identity empty", identity, "a name or a role"),
    ("identity blank", lambda: identity(name=" ", role=""), "a name or a role"),
    ("identity name int", lambda: identity(name=1), "identity.name"),  # type: ignore[arg-type]
    ("persona name empty", lambda: persona(""), "persona.name"),
    ("persona tone int", lambda: persona("p", tone=2), "persona.tone"),  # type: ignore[arg-type]
    ("alias meaning None", lambda: alias("t", None), "alias.meaning"),  # type: ignore[arg-type]
    ("preference aspect blank", lambda: preference(" ", "v"), "preference.aspect"),
    ("correction subject int", lambda: correction(1, "c"), "correction.subject"),  # type: ignore[arg-type]
]


@pytest.mark.parametrize(
    ("call", "message"), [(c, m) for _, c, m in _BAD_CALLS], ids=[i for i, _, _ in _BAD_CALLS]
)
def test_bad_input_is_a_validation_error(call: Callable[[], Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        call()
