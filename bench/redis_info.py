"""What the server itself reports: per-command call counts and times, and memory in use.

Read through a separate client, so the reads never show up on the connection being measured;
INFO's own entry is dropped from every delta.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

#: Commands a benchmarked operation sends itself. Commands a Lua script runs are counted by
#: Redis too (cmdstat_hget, ...), but their time is already inside the script's own entry, so
#: server time sums these names only. None of the measured scripts calls ZADD or PING.
TOP_LEVEL = frozenset({"evalsha", "eval", "evalsha_ro", "eval_ro", "zadd", "ping"})
_IGNORED = frozenset({"info"})


@dataclass(frozen=True)
class CommandStats:
    """Per command name: how many calls, and how many microseconds Redis spent on them."""

    calls: Counter[str]
    usec: Counter[str]

    def minus(self, earlier: CommandStats) -> CommandStats:
        """What happened between ``earlier`` and this snapshot."""
        calls = Counter(self.calls)
        calls.subtract(earlier.calls)
        usec = Counter(self.usec)
        usec.subtract(earlier.usec)
        return CommandStats(+calls, +usec)

    def top_level_usec(self) -> int:
        return sum(self.usec[name] for name in TOP_LEVEL)


def command_stats(client: Any) -> CommandStats:
    """A snapshot of INFO commandstats (``cmdstat_config|get`` reads as ``config|get``)."""
    calls: Counter[str] = Counter()
    usec: Counter[str] = Counter()
    for field, entry in client.info("commandstats").items():
        name = str(field).removeprefix("cmdstat_")
        if name in _IGNORED:
            continue
        calls[name] = int(entry["calls"])
        usec[name] = int(entry["usec"])
    return CommandStats(calls, usec)


def used_memory(client: Any) -> int:
    """Bytes the server has allocated for data, buffers and caches (INFO memory)."""
    return int(client.info("memory")["used_memory"])
