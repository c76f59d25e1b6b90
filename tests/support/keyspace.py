"""Reading raw keys behind a store (test-only; the library itself never scans)."""

from __future__ import annotations

import os
from typing import Any

from redis.cluster import RedisCluster

from ctxstore.store.connection import make_client, parse_url


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
    """:func:`snapshot` through an open client (a test that takes many snapshots keeps one);
    the keys' types and contents are read in two pipelines."""
    pattern = f"{base}:*"
    keys = list(
        client.scan_iter(match=pattern, target_nodes=RedisCluster.PRIMARIES)
        if isinstance(client, RedisCluster)
        else client.scan_iter(match=pattern)
    )
    if os.environ.get("CTXSTORE_TEST_ENCRYPTION", "").strip() not in ("", "0"):
        # The encrypted pass (tests/conftest.py): a user's data key outlives their chats and is
        # made by their first sealed chat; tests/crypto checks it, the others leave it out.
        keys = [key for key in keys if b":dkey:{" not in key]
    types = client.pipeline(transaction=False)
    for key in keys:
        types.type(key)
    kinds = [kind.decode() if isinstance(kind, bytes) else kind for kind in types.execute()]
    contents = client.pipeline(transaction=False)
    for key, kind in zip(keys, kinds, strict=True):
        if kind == "hash":
            contents.hgetall(key)
        elif kind == "zset":
            contents.zrange(key, 0, -1, withscores=True)
        else:
            contents.dump(key)
    return {
        key: (kind, content)
        for key, kind, content in zip(keys, kinds, contents.execute(), strict=True)
    }
