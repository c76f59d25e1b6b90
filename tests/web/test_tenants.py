"""The console's namespaces: one store each, nothing outside them."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import ctxstore
from ctxstore._core.ops import chats
from ctxstore.errors import ConfigurationError
from ctxstore.web.tenants import Tenants, UnknownNamespaceError


def test_each_namespace_reads_its_own_chats_only(backend: str, namespace: str) -> None:
    acme = ctxstore.connect(backend, namespace=f"{namespace}-acme").admin()
    globex = ctxstore.connect(acme.client, namespace=f"{namespace}-globex").admin()
    acme.upsert_chat("shared-id", "alice", {"tenant": "acme"})
    globex.upsert_chat("shared-id", "bob", {"tenant": "globex"})
    tenants = Tenants(acme, [f"{namespace}-acme"])
    assert tenants.labels == [f"{namespace}-acme"]
    meta = asyncio.run(tenants.run(f"{namespace}-acme", chats.get_chat(acme.state, "shared-id")))
    assert meta.user_id == "alice"
    with pytest.raises(UnknownNamespaceError):
        tenants.store(f"{namespace}-globex")
    both = Tenants(acme, [f"{namespace}-acme", f"{namespace}-globex"])
    store = both.store(f"{namespace}-globex")
    assert store.get_chat("shared-id").user_id == "bob"  # type: ignore[union-attr]
    acme.close()


def test_an_async_store_or_a_url_is_served(server_backend: str, namespace: str) -> None:
    ctxstore.connect(server_backend, namespace=namespace).upsert_chat("c1", "alice")

    async def read(tenants: Tenants) -> Any:
        try:
            return await tenants.run(
                namespace, chats.get_chat(tenants.store(namespace).state, "c1")
            )
        finally:
            await tenants.close()

    assert asyncio.run(read(Tenants(server_backend, [namespace]))).user_id == "alice"


def test_the_default_namespace_is_named_dash() -> None:
    assert Tenants(ctxstore.connect("memory://")).labels == ["-"]


def test_bad_arguments_are_configuration_errors() -> None:
    with pytest.raises(ConfigurationError, match="takes a ctxstore Store"):
        Tenants(42)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="named twice"):
        Tenants(ctxstore.connect("memory://"), ["a", "a"])
