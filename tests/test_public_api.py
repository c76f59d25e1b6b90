"""The public API documents itself: every public name and method has a docstring, ``help(ctxstore)``
opens with a quick start, and renamed functions keep their earlier names."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

import ctxstore


def public_members(owner: Any) -> list[tuple[str, Any]]:
    """Public methods and properties a class defines itself (not inherited from builtins)."""
    found = []
    for name, member in vars(owner).items():
        if name.startswith("_"):
            continue
        function = member.__func__ if isinstance(member, (staticmethod, classmethod)) else member
        if inspect.isfunction(function) or isinstance(function, property):
            found.append((name, function))
    return found


def public_classes() -> list[type]:
    classes = []
    for name in ctxstore.__all__:
        value = getattr(ctxstore, name)
        if inspect.isclass(value):
            classes.append(value)
    return classes


def test_every_public_name_has_a_docstring() -> None:
    missing = [
        name
        for name in ctxstore.__all__
        if (inspect.isclass(getattr(ctxstore, name)) or callable(getattr(ctxstore, name)))
        and not (inspect.getdoc(getattr(ctxstore, name)) or "").strip()
    ]
    assert missing == []


@pytest.mark.parametrize("owner", public_classes(), ids=lambda cls: cls.__name__)
def test_every_public_method_has_a_docstring(owner: type) -> None:
    """An override may rely on the documented method it overrides (``inspect.getdoc``)."""
    missing = []
    for cls in owner.__mro__:
        if cls.__module__.split(".")[0] != "ctxstore":
            continue
        for name, _member in public_members(cls):
            if not (inspect.getdoc(getattr(owner, name)) or "").strip():
                missing.append(f"{cls.__name__}.{name}")
    assert missing == []


def test_help_opens_with_a_quick_start() -> None:
    doc = ctxstore.__doc__ or ""
    assert "Quick start" in doc.split("\n\n")[1]
    assert "ctxstore.connect(" in doc
    assert "engine.resolve()" in doc


def test_append_explains_its_policies() -> None:
    for store in (ctxstore.Store, ctxstore.AsyncStore):
        doc = inspect.getdoc(store.append) or ""
        for word in ("expected_head", "on_conflict", "on_existing", "rebase", "fork", "raise"):
            assert word in doc, (store.__name__, word)


def test_fragment_serializers_have_names_that_say_what_they_do() -> None:
    fragment = ctxstore.hint("Be brief.")
    as_dict = ctxstore.prompt.fragment_to_dict(fragment)
    assert isinstance(as_dict, dict)
    assert ctxstore.prompt.fragment_from_dict(as_dict) == fragment
    assert (
        ctxstore.prompt.from_fragment is ctxstore.prompt.fragment_to_dict
    )  # the earlier names still work
    assert ctxstore.prompt.to_fragment is ctxstore.prompt.fragment_from_dict


def test_track_usage_takes_the_js_sdks_camel_case_counts() -> None:
    store = ctxstore.connect("memory://")
    engine = ctxstore.ContextEngine(store=store, chat_id="c1", user_id="alice")
    totals = engine.track_usage({"inputTokens": 3, "outputTokens": 4, "totalTokens": 7})
    assert totals == {"input_tokens": 3, "output_tokens": 4, "total_tokens": 7}
    assert store.get_chat("c1", user_id="alice").metadata["usage"] == totals
