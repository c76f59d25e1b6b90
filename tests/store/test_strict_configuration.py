"""Configuration that fails loudly: ``connect()`` without a URL refuses instead of becoming an
in-process store, and a keyword it does not know is a ``TypeError`` at the call, on every URL
scheme, before any client exists; redis-py's options go in ``redis_options``, checked against
the client's own signature."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest
import redis

import ctxstore
from ctxstore import Settings
from ctxstore.errors import ConfigurationError

CONNECTS = {"sync": ctxstore.connect, "async": ctxstore.connect_async}

#: One URL of each scheme; nothing listens on these ports: every check here happens before a
#: client would connect.
URLS = (
    "memory://",
    "memory://named",
    "redis://127.0.0.1:1/0",
    "rediss://127.0.0.1:1/0",
    "unix:///nonexistent/redis.sock",
    "redis+cluster://127.0.0.1:1",
)


@pytest.mark.parametrize("shell", sorted(CONNECTS))
def test_no_url_and_no_environment_is_a_configuration_error_naming_both_ways(
    shell: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CTXSTORE_URL", raising=False)
    for url in (None, ""):
        with pytest.raises(ConfigurationError) as caught:
            CONNECTS[shell](url)
        assert "CTXSTORE_URL" in str(caught.value)
        assert "connect('redis://" in str(caught.value)
        assert "memory://" in str(caught.value)


@pytest.mark.parametrize("shell", sorted(CONNECTS))
def test_the_environment_names_the_store_and_memory_is_taken_when_named(
    shell: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CTXSTORE_URL", "memory://from-the-environment")
    store = CONNECTS[shell]()
    assert store.state.server == "memory://from-the-environment"


@pytest.mark.parametrize("shell", sorted(CONNECTS))
@pytest.mark.parametrize("url", URLS)
def test_a_misspelled_keyword_is_a_type_error_at_the_call_on_every_scheme(
    shell: str, url: str
) -> None:
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'namespce'") as caught:
        CONNECTS[shell](url, namespce="t")
    assert "did you mean 'namespace'?" in str(caught.value)
    with pytest.raises(TypeError, match=r"'frobnicate'"):
        CONNECTS[shell](url, settings=Settings(namespace="t"), frobnicate=1)


@pytest.mark.parametrize("shell", sorted(CONNECTS))
@pytest.mark.parametrize("url", URLS)
def test_redis_options_are_checked_against_the_clients_signature(shell: str, url: str) -> None:
    with pytest.raises(TypeError, match=r"redis_options has 'socket_timout'") as caught:
        CONNECTS[shell](url, redis_options={"socket_timout": 1.0})
    assert "did you mean 'socket_timeout'?" in str(caught.value)
    with pytest.raises(TypeError, match=r"'socket_timout'"):
        CONNECTS[shell](url, settings=Settings(redis_options={"socket_timout": 1.0}))


def test_a_local_store_is_checked_before_its_server_starts(tmp_path: Path) -> None:
    directory = tmp_path / "store"
    with pytest.raises(TypeError, match="namespce"):
        ctxstore.connect(f"local://{directory}", namespce="t")
    with pytest.raises(TypeError, match="socket_timout"):
        ctxstore.connect(f"local://{directory}", redis_options={"socket_timout": 1})
    assert not directory.exists()  # no server was started, nothing was made


def test_redis_options_reach_the_client() -> None:
    store = ctxstore.connect(
        "redis://127.0.0.1:1/0", redis_options={"socket_timeout": 1.5, "client_name": "w1"}
    )
    kwargs = store.client.get_connection_kwargs()
    assert (kwargs["socket_timeout"], kwargs["client_name"]) == (1.5, "w1")
    store.close()


def test_a_cluster_takes_the_cluster_clients_own_options() -> None:
    # require_full_coverage is RedisCluster's, not Redis's: accepted for a cluster URL only.
    with pytest.raises(TypeError, match="require_full_coverage"):
        ctxstore.connect("redis://127.0.0.1:1/0", redis_options={"require_full_coverage": True})
    with pytest.raises(ctxstore.BackendUnavailableError):  # accepted; then nothing answers
        ctxstore.connect(
            "redis+cluster://127.0.0.1:1", redis_options={"require_full_coverage": True}
        )


@pytest.mark.parametrize("shell", sorted(CONNECTS))
def test_a_client_option_as_a_plain_keyword_still_works_with_a_deprecation_warning(
    shell: str,
) -> None:
    with pytest.warns(DeprecationWarning, match=r"socket_timeout as redis_options") as seen:
        store = CONNECTS[shell]("redis://127.0.0.1:1/0", socket_timeout=1.25)
    assert seen[0].filename == __file__  # the warning points at the caller's line
    assert store.state.settings.redis_options == {"socket_timeout": 1.25}
    assert store.client.get_connection_kwargs()["socket_timeout"] == 1.25
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        quiet = CONNECTS[shell]("redis://127.0.0.1:1/0", redis_options={"socket_timeout": 1})
    assert quiet.client.get_connection_kwargs()["socket_timeout"] == 1


def test_options_for_a_client_passed_in_are_refused() -> None:
    client = redis.Redis(port=1)
    with pytest.raises(TypeError, match="given a client"):
        ctxstore.connect(client, redis_options={"socket_timeout": 1})
    with pytest.raises(TypeError, match="unexpected keyword argument 'namespce'"):
        ctxstore.connect(client, namespce="t")
    client.close()


def test_settings_replace_refuses_a_name_that_is_no_field() -> None:
    with pytest.raises(TypeError, match="no field 'namespce'"):
        Settings().replace(namespce="t")


def test_the_adapters_need_a_store_or_a_url(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("langchain_core")
    from ctxstore.integrations.langchain import CtxStoreChatMessageHistory

    monkeypatch.delenv("CTXSTORE_URL", raising=False)
    with pytest.raises(ConfigurationError, match="CTXSTORE_URL"):
        CtxStoreChatMessageHistory("chat-1", user_id="alice")


def test_nothing_is_created_by_a_refused_call(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[Any] = []
    monkeypatch.setattr("ctxstore.store.factory.make_client", lambda *a, **_: made.append(a))
    for call in (
        lambda: ctxstore.connect("redis://127.0.0.1:1/0", namespce="t"),
        lambda: ctxstore.connect("redis://127.0.0.1:1/0", redis_options={"nope": 1}),
        lambda: ctxstore.connect("memory://", limits="x"),
    ):
        with pytest.raises((TypeError, ConfigurationError)):
            call()
    assert made == []
