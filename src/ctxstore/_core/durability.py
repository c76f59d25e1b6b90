"""Writes acknowledged only once a replica or the local fsync confirmed them.

Redis answers a write as soon as the primary applied it; replication and the append-only file's
fsync follow asynchronously, so an acknowledged write can still be lost when a replica is
promoted (or when the server crashes under ``appendfsync everysec``). A store connected with
``durability="replica"`` sends ``WAIT 1 <timeout ms>`` right after every call marked as a write
(:attr:`ctxstore._core.protocol.Call.writes`), in the same pipeline, so a durable write still
costs one round trip; ``durability="aof"`` sends ``WAITAOF 1 0 <timeout ms>`` (the primary's
own fsync; Redis 7.2 or later). Both wait for what their own connection wrote, so the wait
rides on the write's connection: on a Cluster, the node of the write's slot. Reads are never
followed by a wait.

This module is the I/O-free part: the setting, the commands, and how to read their replies.
The :class:`~ctxstore._core.protocol.Exchange` places the commands and judges the replies.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ctxstore.errors import ConfigurationError, DurabilityError
from ctxstore.settings import DurabilityMode, Settings


@dataclass(frozen=True)
class Durability:
    """What every write of a store waits for, and how long."""

    mode: DurabilityMode
    timeout_ms: int

    @property
    def command(self) -> str:
        return "WAIT" if self.mode == "replica" else "WAITAOF"

    def wait_command(self) -> tuple[str | int, ...]:
        """Sent right after a write, on its connection: one replica, or the local fsync."""
        if self.mode == "replica":
            return ("WAIT", 1, self.timeout_ms)
        return ("WAITAOF", 1, 0, self.timeout_ms)

    def probe_command(self) -> tuple[str | int, ...]:
        """Checks that the server has the command, without waiting: ``WAIT 0 0`` needs no
        replica; ``WAITAOF 1 0`` on a connection that wrote nothing is met at once (and is
        refused where ``appendonly`` is off, which makes ``"aof"`` meaningless)."""
        if self.mode == "replica":
            return ("WAIT", 0, 0)
        return ("WAITAOF", 1, 0, self.timeout_ms)

    def shortfall(self, reply: Any) -> str | None:
        """None when ``reply`` to :meth:`wait_command` confirms the write, else what is missing."""
        if isinstance(reply, BaseException):
            return f"{self.command} failed ({reply})"
        try:
            confirmed = int(reply[0] if self.mode == "aof" else reply)
        except (TypeError, ValueError, IndexError, KeyError):
            return f"{self.command} answered {reply!r}"
        if confirmed >= 1:
            return None
        if self.mode == "replica":
            return f"no replica acknowledged it within {self.timeout_ms} ms"
        return f"the server did not fsync it to its append-only file within {self.timeout_ms} ms"

    def error(self, shortfall: str, context: Mapping[str, Any]) -> DurabilityError:
        lost_by = "a failover" if self.mode == "replica" else "a crash of the server or a failover"
        chat = context.get("chat_id")
        write = "the write" if chat is None else f"the write to chat {chat!r}"
        return DurabilityError(
            f"{write} was applied on the primary, but {shortfall}: it may or may not survive "
            f"{lost_by}. Do not assume it failed: the write may exist, so read it back before "
            "writing it again",
            durability=self.mode,
            **context,
        )


def durability_of(settings: Settings, socket_timeout: float | None) -> Durability | None:
    """What ``settings`` make every write wait for (None: nothing).

    The wait must end before the socket gives up on the reply: a socket timeout first would
    turn a write that was applied into a BackendUnavailableError, with no word about it.
    """
    if settings.durability is None:
        return None
    timeout = settings.durability_timeout
    if socket_timeout is not None and timeout >= socket_timeout:
        raise ConfigurationError(
            f"durability_timeout ({timeout} s) must be shorter than socket_timeout "
            f"({socket_timeout} s): the socket would time out before the wait ends"
        )
    return Durability(settings.durability, max(1, round(timeout * 1000)))
