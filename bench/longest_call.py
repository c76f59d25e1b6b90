"""The longest single command Redis ran for one very long read and one very large append.

Redis runs one command at a time: while a script walks a 100,000-message chain, every other
client of that server waits. The figure that matters for them is the longest single command,
not the caller's total time (which a store can spread over many short commands). The slow log,
with its threshold at 0 around the call, lists every top-level command with its duration.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from time import perf_counter_ns
from typing import Any

from redis_info import SlowLog, commands_run_by
from stores import forget, open_store
from targets import Target
from workload import USER_ID, Chat, batches, messages

SCENARIO = "longest_call"


@dataclass(frozen=True)
class LongestCall:
    """Per repetition: the longest command, the number of commands, and the caller's time."""

    operation: str
    messages: int
    repetitions: int
    max_command_us: list[int]
    longest_command: list[str]
    commands: list[int]
    commands_inside_scripts: list[int]
    server_total_us: list[int]
    caller_us: list[float]
    log_truncated: bool
    median_max_command_us: float
    worst_command_us: int
    median_caller_us: float


def _log_size(messages: int) -> int:
    """Slow-log entries to keep: the commands a script runs per message, with room to spare."""
    return 8 * messages + 1_000


def _observe(stats: Any, work: Any, messages: int) -> tuple[SlowLog, float]:
    elapsed: list[int] = []

    def timed_work() -> None:
        start = perf_counter_ns()
        work()
        elapsed.append(perf_counter_ns() - start)

    calls = commands_run_by(stats, timed_work, _log_size(messages))
    return calls, elapsed[0] / 1_000


Observed = tuple[SlowLog, float]


def _summary(operation: str, size: int, observed: list[Observed]) -> LongestCall:
    longest = [max(log.top_level, key=lambda call: call.duration_us) for log, _ in observed]
    return LongestCall(
        operation=operation,
        messages=size,
        repetitions=len(observed),
        max_command_us=[call.duration_us for call in longest],
        longest_command=[call.command for call in longest],
        commands=[len(log.top_level) for log, _ in observed],
        commands_inside_scripts=[len(log.calls) - len(log.top_level) for log, _ in observed],
        server_total_us=[sum(call.duration_us for call in log.top_level) for log, _ in observed],
        caller_us=[caller for _, caller in observed],
        log_truncated=any(log.truncated for log, _ in observed),
        median_max_command_us=float(statistics.median(call.duration_us for call in longest)),
        worst_command_us=max(call.duration_us for call in longest),
        median_caller_us=float(statistics.median(caller for _, caller in observed)),
    )


def longest_calls(
    target: Target, store: Any, read_length: int, reads: int, append_size: int, appends: int
) -> list[LongestCall]:
    """Appends of ``append_size`` messages (they build the long chain), then cold reads of it.

    The chain needs ``read_length / append_size`` appends; any further ones go to throwaway
    chats, so every append is the same one-call write of ``append_size`` messages.
    """
    chain = Chat("longest-read")
    store.upsert_chat(chain.chat_id, USER_ID)
    appended: list[Observed] = []
    with target.stats_client(chain.chat_id) as stats:
        parts = list(batches(read_length, append_size))
        for index in range(max(appends, len(parts))):
            if index < len(parts):
                chat, part = chain, parts[index]
            else:
                chat, part = Chat(f"longest-append-{index}"), messages(append_size)
                store.upsert_chat(chat.chat_id, USER_ID)

            def append(chat: Chat = chat, part: list[dict[str, str]] = part) -> None:
                result = store.append(
                    chat.chat_id, "main", part, expected_head=chat.head, user_id=USER_ID
                )
                chat.head = result.head_message_id
                chat.length += len(part)

            observed = _observe(stats, append, len(part))
            if len(part) == append_size:
                appended.append(observed)
        reader = open_store(target.url, cold=True)
        read: list[Observed] = []
        try:
            reader.load_branch(
                chain.chat_id, user_id=USER_ID
            )  # connects (HELLO, CLIENT SETINFO) untimed
            for _ in range(reads):
                forget(reader)
                read.append(
                    _observe(
                        stats,
                        lambda: reader.load_branch(chain.chat_id, user_id=USER_ID),
                        read_length,
                    )
                )
        finally:
            reader.close()
    return [
        _summary("store.append", append_size, appended[: max(appends, 1)]),
        _summary("store.load_branch (cold)", read_length, read),
    ]
