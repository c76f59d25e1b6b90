"""One configuration value: ``Settings``, built once and checked at once, taken by ``connect``
and ``connect_async`` alike, with keyword overrides; what stores share per server is bounded."""

from __future__ import annotations

import inspect
from datetime import timedelta

import pytest

import ctxstore
from ctxstore import Limits, Settings
from ctxstore._core.state import ServerRegistry
from ctxstore.errors import ConfigurationError, InvalidIdError, ValidationError


def test_connect_and_connect_async_take_the_same_arguments() -> None:
    sync, asynchronous = (
        inspect.signature(ctxstore.connect),
        inspect.signature(ctxstore.connect_async),
    )
    assert list(sync.parameters) == ["url", "settings", "overrides"]
    assert [(p.name, p.kind, p.default) for p in sync.parameters.values()] == [
        (p.name, p.kind, p.default) for p in asynchronous.parameters.values()
    ]


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"namespace": "a:b"}, InvalidIdError),
        ({"namespace": "{x}"}, InvalidIdError),
        ({"prefix": "ctx*"}, InvalidIdError),
        ({"durability": "disk"}, ConfigurationError),
        ({"durability_timeout": 0}, ConfigurationError),
        ({"durability_timeout": float("nan")}, ConfigurationError),
        ({"cache_bytes": -1}, ConfigurationError),
        ({"ttl": -5}, ValidationError),
        ({"ttl": "1h"}, ValidationError),
        ({"limits": {"max_batch": 3}}, ConfigurationError),
        ({"clock": 12}, ConfigurationError),
        ({"estimate_tokens": "len"}, ValidationError),
        ({"redis_options": [("password", "x")]}, ConfigurationError),
    ],
)
def test_a_bad_setting_is_refused_when_the_settings_are_built(
    fields: dict[str, object], error: type[Exception]
) -> None:
    with pytest.raises(error):
        Settings(**fields)  # type: ignore[arg-type]
    with pytest.raises(error):  # the same through connect(), before any client exists
        ctxstore.connect("redis://127.0.0.1:1", **fields)


def test_settings_are_built_once_and_shared_by_stores() -> None:
    settings = Settings(namespace="acme", ttl=timedelta(hours=1), limits=Limits(max_batch=7))
    first = ctxstore.connect("memory://", settings=settings)
    second = ctxstore.connect_async("memory://", settings=settings)
    assert first.state.settings is settings
    assert second.state.settings is settings
    assert first.state.keyspace.base == "ctx:acme"
    assert first.state.default_ttl_ms == 3_600_000
    assert first.state.limits.max_batch == 7
    first.close()


def test_overrides_replace_fields_and_redis_options_go_to_redis_py() -> None:
    settings = Settings(namespace="acme")
    store = ctxstore.connect(
        "redis://127.0.0.1:1",
        settings=settings,
        namespace="globex",
        redis_options={"socket_timeout": 3.0},
    )
    assert store.state.keyspace.base == "ctx:globex"
    assert store.state.settings.redis_options == {"socket_timeout": 3.0}
    assert store.client.get_connection_kwargs()["socket_timeout"] == 3.0
    assert settings.namespace == "acme"  # frozen: the caller's value is unchanged
    store.close()


def test_settings_is_a_frozen_value() -> None:
    settings = Settings()
    with pytest.raises(AttributeError):
        settings.namespace = "x"  # type: ignore[misc]
    assert settings.replace(namespace="x") == Settings(namespace="x")
    assert settings.replace() is settings


def test_a_durability_longer_than_the_socket_timeout_is_refused_at_connect() -> None:
    settings = Settings(durability="replica", durability_timeout=2.0)
    with pytest.raises(ConfigurationError, match="shorter than socket_timeout"):
        ctxstore.connect(
            "redis://127.0.0.1:1", settings=settings, redis_options={"socket_timeout": 1.0}
        )


def test_a_store_rejects_settings_of_another_type() -> None:
    with pytest.raises(ConfigurationError, match=r"ctxstore\.Settings"):
        ctxstore.connect("memory://", settings={"namespace": "acme"})  # type: ignore[arg-type]


def test_the_registry_of_servers_is_bounded() -> None:
    registry = ServerRegistry(capacity=3)
    caches = [registry.caches(f"redis://host-{n}:6379", "ctx", None) for n in range(5)]
    assert registry.caches("redis://host-4:6379", "ctx", None) is caches[4]
    assert registry.caches("redis://host-0:6379", "ctx", None) is not caches[0]  # evicted
    for n in range(20):
        registry.mark_checked(f"redis://host-{n}:6379")
    assert registry.checked("redis://host-19:6379")
    assert not registry.checked("redis://host-0:6379")


def test_stores_of_one_server_share_its_caches_and_a_private_one_keeps_its_own() -> None:
    registry = ServerRegistry()
    shared = registry.caches("redis://h:1", "ctx", None)
    assert registry.caches("redis://h:1", "ctx", None) is shared
    assert registry.caches("redis://h:1", "ctx:other", None) is not shared
    assert registry.caches(None, "ctx", None) is not shared
    uncached = registry.caches("redis://h:1", "ctx", 0)
    assert uncached.owners is shared.owners
    assert uncached.chains.max_bytes == 0
    assert shared.chains.max_bytes > 0
