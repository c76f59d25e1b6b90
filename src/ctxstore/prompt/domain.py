"""Domain fragments: the business knowledge an agent is told about (terms, rules, examples...).

Every builder returns a plain :class:`~ctxstore.prompt.fragment.Fragment` whose name and data
shape follow ``@deepagents/context``, so prompts rendered from either library look alike and
serialized fragments (:mod:`ctxstore.prompt.serialization`) carry the same fields.

Builders check their input at once: a required field must be a non-empty string (or list), an
optional one may be None. Optional fields that are empty (None, ``""``, whitespace, an empty
list or dict) are left out of the data, so a renderer never prints an empty ``<reason/>``. The
small validators below are shared with :mod:`ctxstore.prompt.user_context`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ctxstore.errors import ValidationError
from ctxstore.prompt.fragment import Fragment

__all__ = [
    "clarification",
    "example",
    "explain",
    "glossary",
    "guardrail",
    "hint",
    "policy",
    "principle",
    "quirk",
    "role",
    "style_guide",
    "term",
    "workflow",
]


# --- validators shared by the fragment builders ------------------------------------------------


def required_text(where: str, value: object) -> str:
    """``value`` if it is a string with some non-blank text, else a ValidationError."""
    if not isinstance(value, str) or not value.strip():
        raise ValidationError(f"{where} must be a non-empty string, got {value!r}")
    return value


def optional_text(where: str, value: object) -> str | None:
    """``value`` if it is None or a string, else a ValidationError (blank text counts as absent)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValidationError(f"{where} must be a string or None, got {value!r}")
    return value


def text_list(where: str, value: object) -> list[str]:
    """A fresh list of the non-empty strings in ``value`` (a list or tuple; not a lone string)."""
    items = _sequence(where, value)
    return [required_text(f"{where}[{index}]", item) for index, item in enumerate(items)]


def drop_empty(**fields: Any) -> dict[str, Any]:
    """``fields`` without the empty ones, so absent optional fields leave no trace in the data."""
    return {key: value for key, value in fields.items() if not _is_empty(value)}


def text_record(
    name: str,
    required: Mapping[str, object],
    optional: Mapping[str, object] | None = None,
    **checked: Any,
) -> Fragment:
    """A fragment whose data is a dict: ``required`` text, ``optional`` text, then ``checked``.

    ``checked`` holds fields the caller validated itself (lists, nested fragments). Errors name
    the field as ``<fragment>.<field>``; empty optional fields are dropped.
    """
    data: dict[str, Any] = {
        key: required_text(f"{name}.{key}", value) for key, value in required.items()
    }
    for key, value in (optional or {}).items():
        data[key] = optional_text(f"{name}.{key}", value)
    return Fragment(name, drop_empty(**data, **checked))


def _is_empty(value: object) -> bool:
    if value is None:
        return True
    if isinstance(value, str):
        return not value.strip()
    return isinstance(value, (list, tuple, dict)) and not value


def _sequence(where: str, value: object) -> Sequence[object]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise ValidationError(f"{where} must be a list, got {value!r}")
    return value


def _policy_list(where: str, value: object) -> list[Fragment | str] | None:
    """Nested policies: prompt fragments (usually :func:`policy`) or plain rule strings."""
    if value is None:
        return None
    result: list[Fragment | str] = []
    for index, item in enumerate(_sequence(where, value)):
        if isinstance(item, Fragment) and not item.is_message:
            result.append(item)
        elif isinstance(item, str):
            result.append(required_text(f"{where}[{index}]", item))
        else:
            raise ValidationError(
                f"{where}[{index}] must be a fragment (not a message) or a string, got {item!r}"
            )
    return result


# --- the builders ------------------------------------------------------------------------------


def role(text: str) -> Fragment:
    """The system role: who the agent is and what it is for."""
    return Fragment("role", required_text("role.text", text))


def hint(text: str) -> Fragment:
    """A behavioural rule that should always apply ("Always exclude test accounts")."""
    return Fragment("hint", required_text("hint.text", text))


def term(name: str, definition: str) -> Fragment:
    """A business term or acronym and what it means in this domain."""
    return text_record("term", {"name": name, "definition": definition})


def guardrail(rule: str, reason: str | None = None, action: str | None = None) -> Fragment:
    """A hard boundary, why it exists, and what to do when a request crosses it."""
    return text_record("guardrail", {"rule": rule}, {"reason": reason, "action": action})


def example(question: str, answer: str, note: str | None = None) -> Fragment:
    """A worked question and answer pair, for few-shot prompting."""
    return text_record("example", {"question": question, "answer": answer}, {"note": note})


def explain(concept: str, explanation: str, therefore: str | None = None) -> Fragment:
    """A concept explained in depth (often by metaphor), and what follows from it."""
    return text_record(
        "explain", {"concept": concept, "explanation": explanation}, {"therefore": therefore}
    )


def clarification(when: str, ask: str, reason: str) -> Fragment:
    """When a request is ambiguous, the question to ask back and why it matters."""
    return text_record("clarification", {"when": when, "ask": ask, "reason": reason})


def workflow(
    task: str,
    steps: Sequence[str],
    triggers: Sequence[str] | None = None,
    notes: str | None = None,
) -> Fragment:
    """A multi-step procedure, the phrases that should start it, and notes on it.

    ``steps`` must hold at least one step: a workflow without steps tells the model nothing.
    """
    step_list = text_list("workflow.steps", steps)
    if not step_list:
        raise ValidationError("workflow.steps must hold at least one step")
    return Fragment(
        "workflow",
        drop_empty(
            task=required_text("workflow.task", task),
            steps=step_list,
            triggers=None if triggers is None else text_list("workflow.triggers", triggers),
            notes=optional_text("workflow.notes", notes),
        ),
    )


def quirk(issue: str, workaround: str) -> Fragment:
    """A data oddity or edge case and how to work around it."""
    return text_record("quirk", {"issue": issue, "workaround": workaround})


def style_guide(prefer: str, never: str | None = None, always: str | None = None) -> Fragment:
    """A style preference, with an optional anti-pattern and an optional must-do.

    The fragment is named ``styleGuide``, as in the TypeScript library, so both render alike.
    """
    return text_record("styleGuide", {"prefer": prefer}, {"never": never, "always": always})


def principle(
    title: str, description: str, policies: Sequence[Fragment | str] | None = None
) -> Fragment:
    """A guiding principle and the concrete policies that put it into practice."""
    return text_record(
        "principle",
        {"title": title, "description": description},
        policies=_policy_list("principle.policies", policies),
    )


def policy(
    rule: str,
    before: str | None = None,
    reason: str | None = None,
    policies: Sequence[Fragment | str] | None = None,
) -> Fragment:
    """A rule, what must happen before it applies, why, and finer-grained sub-policies."""
    return text_record(
        "policy",
        {"rule": rule},
        {"before": before, "reason": reason},
        policies=_policy_list("policy.policies", policies),
    )


def glossary(mapping: Mapping[str, str]) -> Fragment:
    """Business terms mapped to how they are computed ("revenue" -> "SUM(amount)").

    The data is a list of ``{"term", "expression"}`` entries in the mapping's order, which
    renders as a uniform table.
    """
    if not isinstance(mapping, Mapping) or not mapping:
        raise ValidationError(f"glossary needs a non-empty mapping of terms, got {mapping!r}")
    return Fragment(
        "glossary",
        [
            {
                "term": required_text("glossary term", key),
                "expression": required_text(f"glossary[{key!r}]", value),
            }
            for key, value in mapping.items()
        ],
    )
