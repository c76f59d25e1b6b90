"""The report's tables, built from the results once and rendered as text or Markdown.

Every latency row shows its floor's median from the same loop and the ratio of medians, which is
the figure to compare between runs; absolute microseconds are there for scale.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from integrity import Integrity
from longest_call import LongestCall
from memory_use import MemoryUse
from redis_time import RedisTime
from results import Results, Skipped, Timed
from startup import FirstRead, FirstSave, ImportTime
from writers import Throughput, WriterResults


@dataclass(frozen=True)
class Table:
    title: str
    headers: list[str]
    rows: list[list[str]]
    notes: list[str] = field(default_factory=list)


def us(value: float | None) -> str:
    """Microseconds with one decimal below 1 ms, whole numbers above (noise is larger)."""
    if value is None:
        return "-"
    return f"{value:,.1f}" if value < 1_000 else f"{value:,.0f}"


def times(value: float | None) -> str:
    return "-" if value is None else f"{value:,.2f}x"


Column = tuple[str, Callable[[Timed], str]]


def _timed_table(title: str, rows: Sequence[Timed], extra: Sequence[Column] = ()) -> Table:
    headers = [
        *("operation", "backend", "N", "n", "median µs", "p90 µs", "p99 µs"),
        *("floor", "floor µs", "ratio"),
        *(name for name, _ in extra),
    ]
    body = [
        [
            row.operation,
            row.backend,
            f"{row.length:,}",
            f"{row.call.n:,}",
            us(row.call.median_us),
            us(row.call.p90_us),
            us(row.call.p99_us),
            row.ratio_floor,
            us(row.floors[row.ratio_floor].median_us),
            times(row.ratio),
            *(cell(row) for _, cell in extra),
        ]
        for row in rows
    ]
    return Table(title, headers, body)


def _extra(name: str, digits: int = 2) -> Callable[[Timed], str]:
    def cell(row: Timed) -> str:
        value = row.extra.get(name)
        return "-" if value is None else f"{value:,.{digits}f}"

    return cell


def _other_ratio(name_of: Callable[[Timed], str]) -> Callable[[Timed], str]:
    return lambda row: times(row.ratios.get(name_of(row)))


def _skipped(title: str, value: Any) -> Table | None:
    if isinstance(value, Skipped):
        return Table(title, [], [], [f"skipped: {value.reason}"])
    return None


def save_table(rows: Sequence[Timed], title: str = "Save 1 message at chain length N") -> Table:
    return _timed_table(
        title,
        rows,
        [
            ("x RPUSH", _other_ratio(lambda _row: "RPUSH 1 payload")),
            ("x Lua floor", _other_ratio(lambda _row: "Lua append floor")),
        ],
    )


def cold_table(rows: Sequence[Timed], title: str = "Cold read of the branch") -> Table:
    return _timed_table(
        title,
        rows,
        [
            ("x LRANGE", _other_ratio(lambda row: f"LRANGE {row.length:,}")),
            ("x LRANGE + messages", _other_ratio(lambda row: f"LRANGE {row.length:,} + messages")),
            ("redis µs/msg", _extra("redis_us_per_message")),
            ("scripts/call", _extra("scripts_per_call", 1)),
            ("cmds/call", _extra("commands_per_call", 0)),
        ],
    )


def warm_table(
    rows: Sequence[Timed], title: str = "Warm read after another worker's append"
) -> Table:
    return _timed_table(
        title, rows, [("x Lua read floor", _other_ratio(lambda _row: "Lua read floor"))]
    )


def longest_table(found: Sequence[LongestCall]) -> Table:
    headers = [
        *("operation", "messages", "runs", "longest cmd µs (median)", "worst µs"),
        *("command", "top-level cmds", "cmds in scripts", "caller µs (median)"),
    ]
    rows = [
        [
            item.operation,
            f"{item.messages:,}",
            str(item.repetitions),
            us(item.median_max_command_us),
            us(item.worst_command_us),
            ", ".join(sorted(set(item.longest_command))),
            "/".join(str(count) for count in sorted(set(item.commands))),
            "/".join(str(count) for count in sorted(set(item.commands_inside_scripts))),
            us(item.median_caller_us),
        ]
        for item in found
    ]
    notes = (
        ["the slow log filled up: its oldest entries were dropped"]
        if any(item.log_truncated for item in found)
        else []
    )
    return Table("Longest single Redis command (SLOWLOG, threshold 0)", headers, rows, notes)


def _integrity(check: Integrity) -> str:
    return f"{check.lost}/{check.duplicated}/{check.orphaned}/{check.unexpected}"


def writers_table(found: WriterResults) -> Table:
    by_count: dict[int, dict[bool, Throughput]] = {}
    for item in found.configurations:
        by_count.setdefault(item.writers, {})[item.shared_chat] = item
    headers = [
        *("writers", "own chats appends/s", "one chat appends/s", "one/own"),
        *("Redis CPU µs/append (own)", "(one)"),
        *("rebased", "lost/dup/orphan/extra (own)", "lost/dup/orphan/extra (one)"),
    ]
    rows = []
    for writers, pair in sorted(by_count.items()):
        own, one = pair[False], pair[True]
        rows.append(
            [
                str(writers),
                f"{own.appends_per_s:,.0f}",
                f"{one.appends_per_s:,.0f}",
                times(found.ratio_one_chat_to_own[writers]),
                f"{own.redis_cpu_us_per_append:.1f}",
                f"{one.redis_cpu_us_per_append:.1f}",
                f"{one.rebased:,}",
                _integrity(own.integrity),
                _integrity(one.integrity),
            ]
        )
    notes = [
        f"{found.appends_per_writer:,} appends per writer; rates: median of {found.repeats}"
        " rounds; one/own: median of the per-round ratios;"
        f" integrity counts summed over the rounds: {'all 0' if found.all_intact else 'NOT 0'}"
    ]
    return Table("Concurrent writers (1-message appends, on_conflict=rebase)", headers, rows, notes)


def long_context_table(rows: Sequence[Timed]) -> Table:
    return _timed_table(
        "Long conversations: token window, full read, counting at save",
        rows,
        [("x PING", _other_ratio(lambda _row: "PING"))],
    )


def compaction_table(found: Any) -> Table:
    if isinstance(found, Skipped):
        return Table("Compaction of a chat", [], [], [f"skipped: {found.reason}"])
    headers = ["messages", "context tokens before", "after", "covered", "summary tokens", "s"]
    rows = [
        [
            f"{found.messages:,}",
            f"{found.tokens_before:,}",
            f"{found.tokens_after:,}",
            f"{found.covered:,}",
            f"{found.summary_tokens:,}",
            f"{found.seconds:.3f}",
        ]
    ]
    return Table("Compaction of a chat (one job, a fixed 120-word summary)", headers, rows)


def memory_table(found: MemoryUse) -> Table:
    headers = ["measure", "bytes", "bytes/message", "x msgpack payload"]
    rows = [
        [
            f"MEMORY USAGE of {found.keys} chat keys",
            f"{found.key_bytes:,}",
            f"{found.bytes_per_message_keys:,.0f}",
            times(found.ratio_keys_to_payload),
        ],
        [
            "used_memory delta",
            f"{found.used_memory_delta:,}",
            f"{found.bytes_per_message_used_memory:,.0f}",
            times(found.ratio_used_memory_to_payload),
        ],
        *(
            [
                f"  of it: {name}",
                f"{size:,}",
                f"{size / found.messages:,.1f}",
                times(size / found.messages / found.payload_bytes),
            ]
            for name, size in sorted(found.bytes_by_key.items(), key=lambda item: -item[1])
        ),
        [
            "chat keys without the resend ledger (reqs)",
            f"{found.key_bytes - found.ledger_bytes:,}",
            f"{(found.key_bytes - found.ledger_bytes) / found.messages:,.0f}",
            times(found.ratio_keys_without_ledger),
        ],
        ["msgpack payload (mean)", "-", f"{found.payload_bytes:,.1f}", "1.00x"],
    ]
    return Table(
        f"Redis memory per message ({found.messages:,} messages, {found.batch} per append)",
        headers,
        rows,
    )


def redis_time_table(found: RedisTime | Skipped) -> Table:
    title = "Redis time per call (INFO commandstats, A/B blocks on one server)"
    if isinstance(found, Skipped):
        return Table(title, [], [], [f"skipped: {found.reason}"])
    headers = ["call", "Redis µs/call (median of blocks)", "ratio"]
    rows = [
        ["store.append of 1 message (the library's function)", f"{found.append_us:.1f}", "-"],
        [
            "the same append as an EVALSHA script",
            f"{found.append_scripts_us:.1f}",
            f"functions {times(found.functions_x_scripts)}",
        ],
        [
            "floor script (same writes, no checks)",
            f"{found.floor_us:.1f}",
            f"append {times(found.append_x_floor)}",
        ],
        [
            "command floor (append's commands, no Lua)",
            f"{found.command_floor_us:.1f}",
            f"append {times(found.append_x_command_floor)}",
        ],
        [
            "function floor (the append's commands as a function, FCALL)",
            f"{found.script_floor_us:.1f}",
            f"append {times(found.append_x_script_floor)};"
            f" itself {times(found.script_floor_x_floor)} the floor",
        ],
        ["store.load_branch of 1,000, cold", f"{found.read_us:.1f}", "-"],
        ["LRANGE of the same log", f"{found.lrange_us:.1f}", f"read {times(found.read_x_lrange)}"],
    ]
    notes = [
        f"chain of {found.length:,}; {found.blocks} blocks of {found.per_block} saves"
        f" (reads: {found.per_block // 10}) per kind, rotating; see bench/redis_time.py"
    ]
    return Table(title, headers, rows, notes)


def first_read_table(found: FirstRead) -> Table:
    headers = ["fresh process, from after its imports", "runs", "median ms", "p90 ms", "ratio"]
    rows = [
        [
            f"ctxstore.connect + load_branch of {found.length:,}",
            str(found.runs),
            f"{found.store.median_us / 1_000:,.2f}",
            f"{found.store.p90_us / 1_000:,.2f}",
            times(found.ratio),
        ],
        [
            "redis-py connect + LRANGE + unpackb (by hand)",
            str(found.runs),
            f"{found.floor.median_us / 1_000:,.2f}",
            f"{found.floor.p90_us / 1_000:,.2f}",
            "1.00x",
        ],
    ]
    return Table("A fresh process's first read (the serverless cold path)", headers, rows)


def startup_tables(imports: ImportTime, first: FirstSave | Skipped) -> list[Table]:
    headers = ["command", "runs", "median ms", "p90 ms", "max ms"]
    rows = [
        [
            name,
            str(stat.n),
            f"{stat.median_us / 1_000:,.1f}",
            f"{stat.p90_us / 1_000:,.1f}",
            f"{stat.max_us / 1_000:,.1f}",
        ]
        for name, stat in imports.stats.items()
    ]
    notes = [
        f"import ctxstore / import redis: {times(imports.ratio_ctxstore_to_redis)}"
        f" (medians; each includes the interpreter start)",
        f"import ctxstore minus python -c pass: {imports.ctxstore_minus_interpreter_ms:,.1f} ms",
    ]
    tables = [
        Table("Import time in fresh interpreters (wall time of the process)", headers, rows, notes)
    ]
    skipped = _skipped("First save of a fresh process", first)
    if skipped is not None:
        tables.append(skipped)
    elif isinstance(first, FirstSave):
        rows = [
            [
                label,
                str(stat.n),
                f"{stat.median_us / 1_000:,.1f}",
                f"{stat.p90_us / 1_000:,.1f}",
                f"{stat.max_us / 1_000:,.1f}",
            ]
            for label, stat in (
                ("import ctxstore (inside the child)", first.import_part),
                ("import + connect + upsert_chat + append 1", first.total),
                *(
                    (("cold save: import + connect + append 1, exact counting", first.cold_save),)
                    if first.cold_save is not None
                    else ()
                ),
                *(
                    (("the same by hand: import redis + msgpack, connect, EVAL", first.by_hand),)
                    if first.by_hand is not None
                    else ()
                ),
            )
        ]
        tables.append(
            Table(
                "First save of a fresh process (timed inside the child)",
                headers,
                rows,
                [
                    f"whole first save / its import: {times(first.ratio_total_to_import)}",
                    f"cold save / the same by hand: {times(first.cold_x_by_hand)}",
                ],
            )
        )
    return tables


def peers_table(found: Sequence[Any]) -> Table:
    timed_rows = [row for row in found if isinstance(row, Timed)]
    table = _timed_table(
        "Peers at the same N (ratio = peer median / ctxstore median, same loop)",
        timed_rows,
        [("x PING", _other_ratio(lambda _row: "PING"))],
    )
    notes = [f"skipped {row['peer']}: {row['skipped']}" for row in found if isinstance(row, dict)]
    return Table(table.title, table.headers, table.rows, notes)


def side_tables(results: Results, scenario: str, label: str) -> list[Table]:
    value = results.scenarios.get(scenario)
    skipped = _skipped(label, value)
    if skipped is not None:
        return [skipped]
    rows = results.rows(scenario)
    return [
        save_table([row for row in rows if row.scenario == "save"], f"{label}: save"),
        cold_table([row for row in rows if row.scenario == "cold_read"], f"{label}: cold read"),
        warm_table([row for row in rows if row.scenario == "warm_read"], f"{label}: warm read"),
    ]


def all_tables(results: Results) -> list[Table]:
    scenarios = results.scenarios
    tables = [
        save_table(results.rows("save")),
        cold_table(results.rows("cold_read")),
        warm_table(results.rows("warm_read")),
        longest_table(scenarios["longest_call"]),
        writers_table(scenarios["writers"]),
        memory_table(scenarios["memory_per_message"]),
        memory_table(scenarios["memory_burst"]),
        redis_time_table(scenarios["redis_time"]),
        long_context_table(results.rows("long_context")),
        compaction_table(scenarios.get("compaction", Skipped("not run"))),
        *startup_tables(scenarios["import_time"], scenarios["first_save"]),
        first_read_table(scenarios["first_read"]),
        *side_tables(results, "cluster", "3-master cluster"),
        *side_tables(results, "embedded", "Embedded store (memory://)"),
    ]
    peers = scenarios.get("peers")
    skipped = _skipped("Peers", peers)
    tables.append(skipped if skipped is not None else peers_table(peers or []))
    return tables
