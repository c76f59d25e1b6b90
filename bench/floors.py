"""The floors: bare Redis commands that bound what a store operation can cost.

* ``PING``: one round trip through the same client, the least any operation pays.
* ``RPUSH`` of one message payload: the least a write of one message pays.
* ``LRANGE`` of N payloads: the least a read of N stored messages pays on the wire.
* ``LRANGE`` + ``msgpack.unpackb`` of each: the same, decoded into Python dicts, which is
  what a read hands back.

They run on the store's own client (``store.client``), so client-side overhead (cluster routing,
the embedded server) is on both sides of each ratio. The floor keys carry the chat's hash tag,
so on a cluster they live on the node that serves the chat.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgpack
from redis.cluster import RedisCluster

from workload import messages, payload

PING = "PING"
RPUSH = "RPUSH 1 payload"


def lrange_name(length: int) -> str:
    return f"LRANGE {length:,}"


def lrange_unpack_name(length: int) -> str:
    return f"LRANGE {length:,} + unpackb"


class Floors:
    """Floor calls on one client, next to one chat (same cluster node)."""

    def __init__(self, client: Any, tag: str) -> None:
        self.client = client
        self.tag = tag
        self._one = payload(messages(1)[0])
        self._push_key = f"bench-floor:{{{tag}}}:push"
        self._node = client.get_node_from_key(self._push_key) if self.is_cluster else None

    @property
    def is_cluster(self) -> bool:
        return isinstance(self.client, RedisCluster)

    def ping(self) -> object:
        if self._node is not None:
            return self.client.execute_command("PING", target_nodes=self._node)
        return self.client.ping()

    def rpush(self) -> object:
        return self.client.rpush(self._push_key, self._one)

    def list_key(self, length: int) -> str:
        return f"bench-floor:{{{self.tag}}}:list:{length}"

    def fill_list(self, length: int) -> str:
        """A list of the first ``length`` corpus payloads: what a read of N messages returns."""
        key = self.list_key(length)
        self.client.delete(key)
        for start in range(0, length, 1_000):
            chunk = messages(min(1_000, length - start), start)
            self.client.rpush(key, *(payload(item) for item in chunk))
        return key

    def lrange(self, length: int) -> Callable[[], object]:
        key = self.fill_list(length)
        return lambda: self.client.lrange(key, 0, -1)

    def lrange_unpack(self, length: int) -> Callable[[], object]:
        key = self.fill_list(length)
        unpackb = msgpack.unpackb
        return lambda: [unpackb(item) for item in self.client.lrange(key, 0, -1)]

    def for_write(self) -> dict[str, Callable[[], object]]:
        return {PING: self.ping, RPUSH: self.rpush}

    def for_read(self, length: int) -> dict[str, Callable[[], object]]:
        return {
            lrange_name(length): self.lrange(length),
            lrange_unpack_name(length): self.lrange_unpack(length),
        }

    def cleanup(self) -> None:
        """Drop the floor keys (they would otherwise count in the memory probe's delta)."""
        self.client.delete(self._push_key)
