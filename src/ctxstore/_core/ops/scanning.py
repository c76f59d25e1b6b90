"""Walking a namespace's keys on every primary, in bounded steps: for the operators' calls that
must reach keys no index names (the sweep's listing indexes and owner records, a namespace's
purge). Nothing on a request's path scans.

A single server answers ``SCAN`` itself. A Cluster's keys are spread over its primaries and
``SCAN`` walks one node's: each primary is reached through ``scan_node.lua`` with a key of a
slot it serves (found from ``CLUSTER SLOTS``), so the same operation routes like any other,
and the scan's ``COUNT`` bounds each step's work on the server.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from redis.crc import key_slot

from ctxstore._core.format.fields import text
from ctxstore._core.protocol import Call, Operation, command_call, script_call
from ctxstore._core.scripts import load_script
from ctxstore._core.state import StoreState

#: Keys a scan step looks at (``SCAN ... COUNT``): each call stays short on the server.
KEYS_PER_SCAN = 200
#: How far the search for a hash tag of each primary's slots goes (16384 slots: far enough).
_TAG_SEARCH = 1 << 20


def node_routes(state: StoreState) -> Operation[list[str | None]]:
    """One route per primary: None for a single server, else a key of one of the slots each
    primary serves (its hash tag names nothing; it only routes ``scan_node.lua``)."""
    if not state.cluster:
        return [None]
    reply = yield command_call(("CLUSTER SLOTS",), keys=())  # redis-py routes it by this name
    ranges: dict[str, list[tuple[int, int]]] = {}
    for start, end, primary in _slot_ranges(reply):
        ranges.setdefault(primary, []).append((start, end))
    routes: list[str | None] = []
    for primary in sorted(ranges):
        tag = _tag_in(ranges[primary])
        routes.append(f"{state.keyspace.base}:scan:{{{tag}}}")
    return routes


def _slot_ranges(reply: Any) -> list[tuple[int, int, str]]:
    """(first slot, last slot, primary "host:port") of each range of a ``CLUSTER SLOTS``
    reply, parsed by redis-py (a dict) or not (a list)."""
    found = []
    if isinstance(reply, Mapping):
        for (start, end), nodes in reply.items():
            host, port = nodes["primary"][:2]
            found.append((int(start), int(end), f"{text(host)}:{int(port)}"))
        return found
    for item in reply:
        start, end, primary = item[:3]
        found.append((int(start), int(end), f"{text(primary[0])}:{int(primary[1])}"))
    return found


def _tag_in(ranges: Sequence[tuple[int, int]]) -> str:
    for number in range(_TAG_SEARCH):
        tag = f"n{number}"
        slot = key_slot(tag.encode())
        if any(start <= slot <= end for start, end in ranges):
            return tag
    raise RuntimeError("no hash tag found for a primary's slots")  # 16384 slots: unreachable


def scan_call(route: str | None, cursor: int, pattern: str) -> Call[tuple[int, list[str]]]:
    """One step of a scan of the keys matching ``pattern``: on a single server (``route``
    None) ``SCAN`` itself, on a Cluster ``scan_node.lua`` on the primary ``route`` reaches."""
    if route is None:
        return command_call(
            ("SCAN", cursor, "MATCH", pattern, "COUNT", KEYS_PER_SCAN),
            keys=(),
            parse=_scan_reply,
        )
    return script_call(
        load_script("scan_node"), (route,), (cursor, pattern, KEYS_PER_SCAN), parse=_scan_reply
    )


def _scan_reply(reply: Any) -> tuple[int, list[str]]:
    cursor, keys = reply[0], reply[1]
    return int(text(cursor) if isinstance(cursor, bytes) else cursor), [text(key) for key in keys]


def each_key_batch(
    state: StoreState, pattern: str, handle: Callable[[list[str]], Operation[None]]
) -> Operation[int]:
    """Scan every primary for keys matching ``pattern`` and run ``handle`` on each batch as it
    comes (a batch is never more than a scan step found); returns how many keys were seen. A
    key may come twice (``SCAN``'s promise), so ``handle`` must be idempotent."""
    seen = 0
    routes = yield from node_routes(state)
    for route in routes:
        cursor = 0
        while True:
            cursor, keys = yield scan_call(route, cursor, pattern)
            if keys:
                seen += len(keys)
                yield from handle(keys)
            if cursor == 0:
                break
    return seen
