"""Under CI=true a missing redis-server fails the run instead of skipping the server tests."""

from __future__ import annotations

import pytest

from tests.support import servers


def test_missing_server_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(servers.shutil, "which", lambda _name: None)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true"):
        servers.require_redis_server()


def test_missing_server_skips_outside_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(servers.shutil, "which", lambda _name: None)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception):
        servers.require_redis_server()
