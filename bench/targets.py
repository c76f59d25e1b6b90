"""Where a scenario runs: the standalone server, the cluster, or the embedded store.

A target knows its URL, how to read the server's own statistics for the node that holds a chat
(none for ``memory://``), and whether another process can reach it (an embedded store lives in
one process, so "another worker" is then another store of the same process).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

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

    @property
    def is_cluster(self) -> bool:
        return self.url.startswith("redis+cluster://")

    def _address(self, chat_id: str) -> tuple[str, int]:
        """Host and port of the server (for a cluster: of the node serving ``chat_id``)."""
        host_port = self.url.split("://", 1)[1].split("/", 1)[0]
        host, port = host_port.rsplit(":", 1)
        if not self.is_cluster:
            return host, int(port)
        cluster = RedisCluster(host=host, port=int(port))
        try:
            node = cluster.get_node_from_key(chat_key_pattern(chat_id))  # type: ignore[no-untyped-call]
            return str(node.host), int(node.port)
        finally:
            cluster.close()

    @contextmanager
    def stats_client(self, chat_id: str) -> Iterator[redis.Redis | None]:
        """A plain client of its own on the server (or cluster node) serving ``chat_id``;
        None for the embedded store. It never goes through the store being measured."""
        if self.is_embedded:
            yield None
            return
        host, port = self._address(chat_id)
        plain = redis.Redis(host=host, port=port)
        try:
            yield plain
        finally:
            plain.close()
