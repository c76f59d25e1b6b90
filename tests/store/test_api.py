"""The public surface: sync and async stores match, imports stay light."""

from __future__ import annotations

import inspect
import subprocess
import sys

import ctxstore
from ctxstore import AsyncStore, Store

SYNC_ONLY = {"__enter__", "__exit__"}
ASYNC_ONLY = {"__aenter__", "__aexit__"}
#: Methods that do no I/O: plain methods on both stores.
NO_IO = {"clear_cache"}


def public(cls: type) -> dict[str, object]:
    return {
        name: member
        for name, member in vars(cls).items()
        if not name.startswith("_") or name in SYNC_ONLY | ASYNC_ONLY
    }


def test_sync_and_async_stores_have_the_same_names_and_signatures() -> None:
    sync_members, async_members = public(Store), public(AsyncStore)
    assert set(sync_members) - SYNC_ONLY == set(async_members) - ASYNC_ONLY
    for name in set(sync_members) - SYNC_ONLY:
        sync_member, async_member = sync_members[name], async_members[name]
        if isinstance(sync_member, property):
            assert isinstance(async_member, property), name
            continue
        assert callable(sync_member)
        assert callable(async_member)
        assert inspect.signature(sync_member) == inspect.signature(async_member), name
        assert not inspect.iscoroutinefunction(sync_member), name
        assert inspect.iscoroutinefunction(async_member) == (name not in NO_IO), name


def test_connect_functions_take_the_same_arguments() -> None:
    sync_params = inspect.signature(ctxstore.connect).parameters
    async_params = inspect.signature(ctxstore.connect_async).parameters
    assert list(sync_params) == list(async_params)


def test_import_loads_neither_litellm_nor_tiktoken_nor_the_embedded_store() -> None:
    code = (
        "import sys, ctxstore, ctxstore.context.fragment\n"
        "heavy = [m for m in ('litellm', 'tiktoken', 'fakeredis', 'lupa') if m in sys.modules]\n"
        "print(','.join(heavy))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == ""


def test_every_error_derives_from_the_root() -> None:
    errors = [
        value
        for value in vars(ctxstore).values()
        if isinstance(value, type) and issubclass(value, Exception)
    ]
    assert len(errors) >= 20
    assert all(issubclass(error, ctxstore.CtxStoreError) for error in errors)
    assert issubclass(ctxstore.ValidationError, ValueError)
    assert issubclass(ctxstore.NotFoundError, LookupError)
