"""ContextEngine and AsyncContextEngine expose the same names and signatures."""

from __future__ import annotations

import inspect

from ctxstore import AsyncContextEngine, ContextEngine

IO_METHODS = {
    "resolve",
    "save",
    "rewind",
    "btw",
    "switch_branch",
    "switch_to_version",
    "checkpoint",
    "restore",
    "update_chat",
    "track_usage",
    "token_count",
    "inspect",
    "stream_turn",
    "active_stream",
}


def members(cls: type) -> dict[str, object]:
    names = {name for name in dir(cls) if not name.startswith("_")}
    return {name: inspect.getattr_static(cls, name) for name in names}


def test_same_public_names() -> None:
    assert set(members(ContextEngine)) == set(members(AsyncContextEngine))
    assert set(members(ContextEngine)) >= IO_METHODS


def test_same_signatures_and_async_where_it_does_io() -> None:
    sync_members, async_members = members(ContextEngine), members(AsyncContextEngine)
    for name, sync_member in sync_members.items():
        async_member = async_members[name]
        if isinstance(sync_member, property):
            assert isinstance(async_member, property), name
            continue
        sync_sig = inspect.signature(sync_member)  # type: ignore[arg-type]
        async_sig = inspect.signature(async_member)  # type: ignore[arg-type]
        assert list(sync_sig.parameters) == list(async_sig.parameters), name
        for param in sync_sig.parameters:
            assert sync_sig.parameters[param].default == async_sig.parameters[param].default
            assert sync_sig.parameters[param].kind == async_sig.parameters[param].kind
        assert inspect.iscoroutinefunction(async_member) == (name in IO_METHODS), name
        assert not inspect.iscoroutinefunction(sync_member), name


def test_constructors_match() -> None:
    sync_params = inspect.signature(ContextEngine.__init__).parameters
    async_params = inspect.signature(AsyncContextEngine.__init__).parameters
    assert list(sync_params) == list(async_params)


def test_an_engine_refuses_the_other_flavour_of_store() -> None:
    import pytest

    import ctxstore

    with pytest.raises(ctxstore.errors.ConfigurationError, match="connect_async"):
        AsyncContextEngine(store=ctxstore.connect("memory://").admin(), chat_id="c", user_id="u")  # type: ignore[arg-type]
    with pytest.raises(ctxstore.errors.ConfigurationError, match=r"connect\(\)"):
        ContextEngine(store=ctxstore.connect_async("memory://").admin(), chat_id="c", user_id="u")  # type: ignore[arg-type]
