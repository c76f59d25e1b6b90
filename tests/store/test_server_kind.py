"""The servers the suite runs on are the kind ``CTXSTORE_TEST_SERVER`` asks for: a Valkey run
that quietly started redis-server would prove nothing about Valkey."""

from __future__ import annotations

import redis

from tests.support import servers


def test_the_servers_are_the_kind_asked_for(server_backend: str) -> None:
    url = server_backend.replace("redis+cluster://", "redis://")
    client = redis.Redis.from_url(url)
    try:
        info = client.info("server")
    finally:
        client.close()
    if servers.server_kind() == "valkey":
        assert str(info["valkey_version"]).startswith(("8.", "9."))
    else:
        assert "valkey_version" not in info
        assert str(info["redis_version"]).startswith(("7.", "8."))
