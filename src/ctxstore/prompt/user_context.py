"""User fragments: who the user is, who the agent plays, and what this user means and wants.

Same rules as :mod:`ctxstore.prompt.domain`: names and data shapes follow
``@deepagents/context``, input is checked at once, and empty optional fields are left out.
"""

from __future__ import annotations

from ctxstore.errors import ValidationError
from ctxstore.prompt.domain import text_record
from ctxstore.prompt.fragment import Fragment

__all__ = ["alias", "correction", "identity", "persona", "preference"]


def identity(name: str | None = None, role: str | None = None) -> Fragment:
    """The user's name and/or role, the lens they look at answers through.

    Both are optional, but not both absent: an identity with neither says nothing.
    """
    result = text_record("identity", {}, {"name": name, "role": role})
    if not result.data:
        raise ValidationError("identity needs a name or a role")
    return result


def persona(
    name: str,
    role: str | None = None,
    objective: str | None = None,
    tone: str | None = None,
) -> Fragment:
    """The persona the agent plays: its name, role, objective and tone of voice."""
    return text_record(
        "persona", {"name": name}, {"role": role, "objective": objective, "tone": tone}
    )


def alias(term: str, meaning: str) -> Fragment:
    """What this user means by a word ("the big table" -> "the orders table")."""
    return text_record("alias", {"term": term, "meaning": meaning})


def preference(aspect: str, value: str) -> Fragment:
    """How this user wants one aspect of answers ("date format" -> "YYYY-MM-DD")."""
    return text_record("preference", {"aspect": aspect, "value": value})


def correction(subject: str, clarification: str) -> Fragment:
    """A misunderstanding the user corrected, kept so it is not repeated."""
    return text_record("correction", {"subject": subject, "clarification": clarification})
