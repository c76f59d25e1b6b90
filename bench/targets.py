"""Where a scenario runs: the standalone server, the cluster, or the embedded store.

A target knows its URL, how to read the server's own statistics for the node that holds a chat
(none for ``memory://``), and whether another process can reach it (an embedded store lives in
one process, so "another worker" is then another store of the same process).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import redis
from redis.cluster import RedisCluster

from stores import chat_key_pattern


@dataclass(frozen=True)
class Target:
    label: str
    url: str

    @property
    def is_embedded(self) -> bool:
        return self.url.startswith("memory://")

    @contextmanager
    def stats_client(self, store: Any, chat_id: str) -> Iterator[redis.Redis | None]:
        """A plain client on the node serving ``chat_id`` (None for the embedded store)."""
        if self.is_embedded:
            yield None
            return
        client = store.client
        if isinstance(client, RedisCluster):
            node = client.get_node_from_key(chat_key_pattern(chat_id))
            plain = redis.Redis(host=node.host, port=node.port)
        else:
            kwargs = client.connection_pool.connection_kwargs
            plain = redis.Redis(host=kwargs["host"], port=kwargs["port"])
        try:
            yield plain
        finally:
            plain.close()
