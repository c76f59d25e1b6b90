"""Reading raw keys behind a store (test-only; the library itself never scans)."""

from __future__ import annotations

from typing import Any

from redis.cluster import RedisCluster

from ctxstore.connection import make_client, parse_url


def raw_client(url: str) -> Any:
    """A plain sync client on the same data as a store made from ``url``."""
    return make_client(parse_url(url), {}, asynchronous=False)


def snapshot(url: str, base: str) -> dict[bytes, Any]:
    """Every key under ``<base>:`` with its full content."""
    client = raw_client(url)
    try:
        return snapshot_of(client, base)
    finally:
        client.close()


def snapshot_of(client: Any, base: str) -> dict[bytes, Any]:
    """:func:`snapshot` through an open client (a test that takes many snapshots keeps one)."""
    pattern = f"{base}:*"
    result: dict[bytes, Any] = {}
    keys = (
        client.scan_iter(match=pattern, target_nodes=RedisCluster.PRIMARIES)
        if isinstance(client, RedisCluster)
        else client.scan_iter(match=pattern)
    )
    for key in keys:
        kind = client.type(key)
        kind = kind.decode() if isinstance(kind, bytes) else kind
        if kind == "hash":
            result[key] = ("hash", client.hgetall(key))
        elif kind == "zset":
            result[key] = ("zset", client.zrange(key, 0, -1, withscores=True))
        else:
            result[key] = (kind, client.dump(key))
    return result
