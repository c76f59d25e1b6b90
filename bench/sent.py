"""Counting the commands this process sends, by name, through any redis-py connection.

The server's ``INFO commandstats`` counts a script's inner commands too (a script's ``HGET``
shows up as ``cmdstat_hget``, and its time is already inside the script's own entry), so the
server alone cannot tell how long the commands a *client* sent took when a call mixes scripts
with plain commands (a long read: a walk script, then plain ``LRANGE``s). With the names and
counts of what was sent, :func:`top_level_usec` gives each sent plain command the average time
the server reports for its name.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

import redis.connection as sync_connection

from redis_info import SCRIPTS, CommandStats


def _name(args: Any) -> str:
    first = args[0]
    return (first.decode() if isinstance(first, bytes) else str(first)).lower()


@contextmanager
def count_sent() -> Iterator[Counter[str]]:
    """Within the block, every command sent (alone or in a pipeline), counted by name."""
    sent: Counter[str] = Counter()
    send_command = sync_connection.AbstractConnection.send_command
    pack_commands = sync_connection.AbstractConnection.pack_commands

    def single(self: Any, *args: Any, **kwargs: Any) -> Any:
        sent[_name(args)] += 1
        return send_command(self, *args, **kwargs)

    def pack(self: Any, commands: Any) -> Any:
        commands = list(commands)
        sent.update(_name(command) for command in commands)
        return pack_commands(self, commands)

    with (
        mock.patch.object(sync_connection.AbstractConnection, "send_command", single),
        mock.patch.object(sync_connection.AbstractConnection, "pack_commands", pack),
    ):
        yield sent


def top_level_usec(delta: CommandStats, sent: Counter[str]) -> float:
    """Server time of the commands the client sent: scripts whole (inner commands included),
    each plain command at its name's average time."""
    usec = float(sum(delta.usec[name] for name in SCRIPTS))
    for name, count in sent.items():
        if name in SCRIPTS or not delta.calls[name]:
            continue
        usec += count * delta.usec[name] / delta.calls[name]
    return usec
