"""Counting what a call puts on the wire: round trips, command names and their sizes.

Patches redis-py's connection classes (which fakeredis connections inherit) for the duration of
a ``with trace_wire() as wire:`` block. A round trip is one ``send_packed_command``: a single
command or a whole pipeline.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from unittest import mock

import redis.asyncio.connection as async_connection
import redis.connection as sync_connection

#: The commands that run ctxstore's Lua: the library's functions, or the scripts where the
#: store falls back to them (``CTXSTORE_SCRIPTING=scripts``).
LUA_COMMANDS = frozenset({"FCALL", "FCALL_RO", "EVALSHA", "EVAL"})


@dataclass
class Wire:
    round_trips: int = 0
    commands: list[str] = field(default_factory=list)
    #: How many arguments each command carried (its name included), in the order sent.
    sizes: list[int] = field(default_factory=list)

    @property
    def widest(self) -> int:
        """The most arguments one command carried (0 when none was sent)."""
        return max(self.sizes, default=0)

    def count(self, name: str) -> int:
        return sum(1 for command in self.commands if command == name)

    @property
    def script_calls(self) -> int:
        """The calls of ctxstore's Lua (as functions or scripts)."""
        return sum(1 for command in self.commands if command in LUA_COMMANDS)

    @property
    def shapes(self) -> list[str]:
        """The commands sent, each call of ctxstore's Lua as ``LUA`` (whichever way it went)."""
        return ["LUA" if command in LUA_COMMANDS else command for command in self.commands]


def _name(args: Any) -> str:
    first = args[0]
    return (first.decode() if isinstance(first, bytes) else str(first)).upper()


@contextmanager
def trace_wire() -> Iterator[Wire]:
    wire = Wire()
    sync_send = sync_connection.AbstractConnection.send_packed_command
    sync_single = sync_connection.AbstractConnection.send_command
    sync_pack = sync_connection.AbstractConnection.pack_commands
    async_send = async_connection.AbstractConnection.send_packed_command
    async_single = async_connection.AbstractConnection.send_command
    async_pack = async_connection.AbstractConnection.pack_commands

    def send(self: Any, *args: Any, **kwargs: Any) -> Any:
        wire.round_trips += 1
        return sync_send(self, *args, **kwargs)

    def single(self: Any, *args: Any, **kwargs: Any) -> Any:
        wire.commands.append(_name(args))
        wire.sizes.append(len(args))
        return sync_single(self, *args, **kwargs)

    def pack(self: Any, commands: Any) -> Any:
        commands = list(commands)
        wire.commands.extend(_name(command) for command in commands)
        wire.sizes.extend(len(command) for command in commands)
        return sync_pack(self, commands)

    async def asend(self: Any, *args: Any, **kwargs: Any) -> Any:
        wire.round_trips += 1
        return await async_send(self, *args, **kwargs)

    async def asingle(self: Any, *args: Any, **kwargs: Any) -> Any:
        wire.commands.append(_name(args))
        wire.sizes.append(len(args))
        return await async_single(self, *args, **kwargs)

    def apack(self: Any, commands: Any) -> Any:
        commands = list(commands)
        wire.commands.extend(_name(command) for command in commands)
        wire.sizes.extend(len(command) for command in commands)
        return async_pack(self, commands)

    with (
        mock.patch.object(sync_connection.AbstractConnection, "send_packed_command", send),
        mock.patch.object(sync_connection.AbstractConnection, "send_command", single),
        mock.patch.object(sync_connection.AbstractConnection, "pack_commands", pack),
        mock.patch.object(async_connection.AbstractConnection, "send_packed_command", asend),
        mock.patch.object(async_connection.AbstractConnection, "send_command", asingle),
        mock.patch.object(async_connection.AbstractConnection, "pack_commands", apack),
    ):
        yield wire
