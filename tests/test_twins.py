"""Sync and async twins are documented once: each async method's docstring in the source is a
pointer to its sync twin, and at run time it carries the sync method's whole text."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from ctxstore._base.twins import pointer
from ctxstore.engine import (
    AsyncContextEngine,
    AsyncStreamedTurn,
    AsyncTurn,
    ContextEngine,
    StreamedTurn,
    Turn,
)
from ctxstore.store import AsyncStore, Store

TWINS = [
    (Store, AsyncStore),
    (ContextEngine, AsyncContextEngine),
    (Turn, AsyncTurn),
    (StreamedTurn, AsyncStreamedTurn),
]
#: Async names and the sync names they stand for.
SYNC_NAMES = {"__aenter__": "__enter__", "__aexit__": "__exit__", "aclose": "close"}


def source_docstrings(cls: type) -> dict[str, str | None]:
    """Each method the class defines and its docstring as written in the source."""
    tree = ast.parse(Path(inspect.getfile(cls)).read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == cls.__name__:
            return {
                item.name: ast.get_docstring(item)
                for item in node.body
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
            }
    raise AssertionError(f"{cls.__name__} not found in its module")


@pytest.mark.parametrize(("sync", "twin"), TWINS, ids=lambda cls: cls.__name__)
def test_an_async_twin_points_at_its_sync_docs_instead_of_copying_them(
    sync: type, twin: type
) -> None:
    documented = 0
    for name, written in source_docstrings(twin).items():
        sync_name = SYNC_NAMES.get(name, name)
        sync_member = getattr(sync, sync_name, None)
        if sync_member is None or (name.startswith("_") and name not in SYNC_NAMES):
            continue
        if name in SYNC_NAMES and written is None:
            continue  # the context manager protocol, documented by the class
        assert written == pointer(sync, sync_name), f"{twin.__name__}.{name}"
        whole = inspect.getdoc(getattr(twin, name)) or ""
        assert whole.startswith(written)
        assert (inspect.getdoc(sync_member) or "") in whole
        documented += 1
    assert documented >= 1
