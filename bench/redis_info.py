"""What the server itself reports: per-command counts and times, memory, and the slow log.

Read through a separate plain client, so the readings never show up on the connection being
measured; INFO's, CONFIG's and SLOWLOG's own entries are dropped from every delta.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

#: Script entry points. Redis also counts the commands a script runs (cmdstat_hget, ...), and
#: their time is already inside the script's own entry, so when scripts ran only these count.
SCRIPTS = frozenset({"eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro"})
_ADMIN = frozenset({"info", "config|set", "config|get", "slowlog|get", "slowlog|reset"})


@dataclass(frozen=True)
class CommandStats:
    """Per command name: how many calls, and how many microseconds Redis spent on them."""

    calls: Counter[str]
    usec: Counter[str]

    def minus(self, earlier: CommandStats) -> CommandStats:
        calls = Counter(self.calls)
        calls.subtract(earlier.calls)
        usec = Counter(self.usec)
        usec.subtract(earlier.usec)
        return CommandStats(+calls, +usec)

    def without(self, names: Iterable[str]) -> CommandStats:
        drop = {name.lower() for name in names}
        keep = [name for name in self.calls if name not in drop]
        return CommandStats(
            Counter({name: self.calls[name] for name in keep}),
            Counter({name: self.usec[name] for name in keep}),
        )

    def server_usec(self) -> int:
        """Time of the top-level commands: the scripts when any ran, else every command."""
        if any(self.calls[name] for name in SCRIPTS):
            return sum(self.usec[name] for name in SCRIPTS)
        return sum(self.usec.values())

    def script_calls(self) -> int:
        return sum(self.calls[name] for name in SCRIPTS)


def command_stats(client: Any) -> CommandStats:
    """A snapshot of INFO commandstats (``cmdstat_config|get`` reads as ``config|get``)."""
    calls: Counter[str] = Counter()
    usec: Counter[str] = Counter()
    for field, entry in client.info("commandstats").items():
        name = str(field).removeprefix("cmdstat_")
        if name in _ADMIN:
            continue
        calls[name] = int(entry["calls"])
        usec[name] = int(entry["usec"])
    return CommandStats(calls, usec)


def used_memory(client: Any) -> int:
    """Bytes the server has allocated for data, buffers and caches (INFO memory)."""
    return int(client.info("memory")["used_memory"])


@dataclass(frozen=True)
class SlowCall:
    """One command as the slow log saw it: its name, how long Redis ran it, and whether a
    script ran it (Redis 7 logs those too, from a client whose address is ``?:0``; their time
    is already inside the script's own entry)."""

    command: str
    duration_us: int
    nested: bool


@dataclass(frozen=True)
class SlowLog:
    """The commands Redis ran during some work; ``truncated`` when the log filled up (the
    oldest entries, which come first, were dropped)."""

    calls: list[SlowCall]
    truncated: bool

    @property
    def top_level(self) -> list[SlowCall]:
        return [call for call in self.calls if not call.nested]


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _slow_call(entry: dict[str, Any]) -> SlowCall:
    name = _text(entry.get("command", b"")).split(" ", 1)[0].lower()
    address = _text(entry.get("client_address", ""))
    return SlowCall(name, int(entry["duration"]), nested=address.startswith("?"))


def commands_run_by(client: Any, work: Callable[[], object], max_entries: int) -> SlowLog:
    """Every command Redis ran during ``work``, with its duration, from the slow log.

    The threshold is set to 0 (log everything) only around ``work``, then restored. Redis 7
    also logs each command a script runs, before the script's own entry, so ``max_entries``
    must cover those: when the log fills up, the oldest entries are dropped (``truncated``).
    """
    previous = client.config_get("slowlog-*")
    client.config_set("slowlog-log-slower-than", 0)
    client.config_set("slowlog-max-len", max_entries)
    try:
        client.slowlog_reset()
        work()
        entries = client.slowlog_get(max_entries)
    finally:
        for name, value in previous.items():
            client.config_set(name, value)
        client.slowlog_reset()
    calls = [_slow_call(entry) for entry in entries]
    kept = [call for call in calls if call.command not in {"slowlog", "config", "info"}]
    return SlowLog(kept, truncated=len(entries) >= max_entries)
