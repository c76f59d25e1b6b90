"""The floors: bare Redis commands that bound what a store operation can cost.

* ``PING``: one round trip through the same client, the least any operation pays.
* ``RPUSH`` of one message payload: the least a write of one message pays.
* ``Lua append floor``: a script with the commands the append script runs for one message on
  the common path (read the chat and the branch, check and extend the token entries, push the
  record, move the head, update the chat, remember the request id, move both listing indexes)
  and none of its checks, called with the same number of keys (12) and about the same
  arguments. It is the least an atomic compare-and-set
  append with a listing update can cost through redis-py; the gap between it and the
  measured append is what ctxstore's own Python and Lua add.
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
LUA_APPEND = "Lua append floor"
LUA_READ = "Lua read floor"

#: The least a warm read does in its one round trip: a script reading the branch record and
#: the newest record of the log (what another worker added), unpacked by the client.
_READ_FLOOR_SCRIPT = """
return {redis.call('HGET', KEYS[1], 'main'), redis.call('LRANGE', KEYS[2], -1, -1)}
"""

#: The append script's commands for one message on the common path, without its checks.
_APPEND_FLOOR_SCRIPT = """
redis.call('HMGET', KEYS[1], 'user_id', 'fmt', 'inc', 'updated_at', 'message_count', 'req_since')
redis.call('HGET', KEYS[5], 'main')
local length = redis.call('LLEN', KEYS[2])
redis.call('STRLEN', KEYS[8])
redis.call('GETRANGE', KEYS[8], length * 6 - 6, length * 6 - 1)
redis.call('RPUSH', KEYS[2], ARGV[3])
redis.call('APPEND', KEYS[8], ARGV[4])
redis.call('HSET', KEYS[5], 'main', length .. '\\t1.a.b\\t1\\t0\\t' .. length)
redis.call('HSET', KEYS[1], 'message_count', length + 1, 'updated_at', ARGV[1])
redis.call('HSET', KEYS[6], ARGV[2], 'main\\t' .. length)
redis.call('ZADD', KEYS[10], 'GT', ARGV[1], 'floor')
redis.call('ZADD', KEYS[11], 'GT', ARGV[1], 'floor')
return {'main', length, {}, 0, '', {}, ARGV[1], 'user', 1, 'inc', -1, '', 0, length}
"""


def lrange_name(length: int) -> str:
    return f"LRANGE {length:,}"


def lrange_unpack_name(length: int) -> str:
    return f"LRANGE {length:,} + unpackb"


def lrange_messages_name(length: int) -> str:
    return f"LRANGE {length:,} + messages"


class Floors:
    """Floor calls on one client, next to one chat (same cluster node)."""

    def __init__(self, client: Any, tag: str) -> None:
        self.client = client
        self.tag = tag
        self._one = payload(messages(1)[0])
        self._push_key = f"bench-floor:{{{tag}}}:push"
        self._node = client.get_node_from_key(self._push_key) if self.is_cluster else None
        self._append_keys = [f"bench-floor:{{{tag}}}:append:{index}" for index in range(12)]
        self._append_script = client.register_script(_APPEND_FLOOR_SCRIPT)
        self._appends = 0
        self._read_keys = [f"bench-floor:{{{tag}}}:read:branch", self.list_key(1)]
        self._read_script = client.register_script(_READ_FLOOR_SCRIPT)

    @property
    def is_cluster(self) -> bool:
        return isinstance(self.client, RedisCluster)

    def ping(self) -> object:
        if self._node is not None:
            return self.client.execute_command("PING", target_nodes=self._node)
        return self.client.ping()

    def rpush(self) -> object:
        return self.client.rpush(self._push_key, self._one)

    def lua_append(self) -> object:
        """The append floor script, with the append's key count and argument shapes."""
        self._appends += 1
        now = str(1_700_000_000_000 + self._appends)
        return self._append_script(
            keys=self._append_keys,
            args=[now, f"request-{self._appends}", self._one, b"\x00\x00\x00\x00\x00\x32"],
        )

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

    def lrange_messages(self, length: int) -> Callable[[], object]:
        """``LRANGE`` of N records and what a read returns for each: the record unpacked and a
        message dict (id, parent id, time, payload) built from it, as ``load_branch`` returns.
        The least the API's shape costs over ``LRANGE`` + ``unpackb``."""
        key = self.fill_records(length)
        unpackb = msgpack.unpackb

        def read() -> object:
            out, parent = [], None
            for position, item in enumerate(self.client.lrange(key, 0, -1)):
                record = unpackb(item)
                message_id = f"{position}.abcdefghijklm.{record[4]}"
                out.append(
                    {
                        "id": message_id,
                        "parent_id": parent,
                        "created_at": record[1],
                        "message": record[2],
                    }
                )
                parent = message_id
            return out

        return read

    def fill_records(self, length: int) -> str:
        """A list of N message records as the log holds them ([parent, time, payload, None,
        tag], msgpack), the same payloads as :meth:`fill_list`."""
        key = f"bench-floor:{{{self.tag}}}:records:{length}"
        self.client.delete(key)
        for start in range(0, length, 1_000):
            chunk = messages(min(1_000, length - start), start)
            records = [
                msgpack.packb([-2, 1_700_000_000_000, item, None, "abcdef"]) for item in chunk
            ]
            self.client.rpush(key, *records)
        return key

    def lua_read(self) -> object:
        """The warm-read floor: one script, the branch record and the newest record."""
        branch, newest = self._read_script(keys=self._read_keys)
        return branch, [msgpack.unpackb(item) for item in newest]

    def for_warm_read(self) -> dict[str, Callable[[], object]]:
        self.client.hset(self._read_keys[0], "main", "0\t0.abcdefghijklm.abcdef\t1\t1\t1")
        self.fill_list(1)
        return {PING: self.ping, LUA_READ: self.lua_read}

    def for_write(self) -> dict[str, Callable[[], object]]:
        return {PING: self.ping, RPUSH: self.rpush, LUA_APPEND: self.lua_append}

    def for_read(self, length: int) -> dict[str, Callable[[], object]]:
        return {
            lrange_name(length): self.lrange(length),
            lrange_unpack_name(length): self.lrange_unpack(length),
            lrange_messages_name(length): self.lrange_messages(length),
        }

    def cleanup(self) -> None:
        """Drop the floor keys (they would otherwise count in the memory probe's delta)."""
        self.client.delete(self._push_key)
        for key in self._append_keys:
            self.client.delete(key)
