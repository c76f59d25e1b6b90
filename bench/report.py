"""Rendering the results: a plain-text report for people, JSON for tools that compare runs."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from probes import ChainMemory, CommandCount, StorageMemory
from timing import Latency

MIB = 1024 * 1024


@dataclass(frozen=True)
class Results:
    """Everything one run measured, plus where it ran."""

    environment: dict[str, str]
    latencies: list[Latency]
    chain_memory: ChainMemory
    storage: StorageMemory
    commands: list[CommandCount]


def _us(value: float | None) -> str:
    """Microseconds with one decimal below 1 ms, whole numbers above (noise is larger)."""
    if value is None:
        return "-"
    return f"{value:,.1f}" if value < 1_000 else f"{value:,.0f}"


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """Columns padded to their widest cell; the first column left-aligned, numbers right."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows, strict=True)]

    def line(cells: Sequence[str]) -> str:
        first = cells[0].ljust(widths[0])
        rest = (cell.rjust(width) for cell, width in zip(cells[1:], widths[1:], strict=True))
        return "  ".join([first, *rest]).rstrip()

    return [line(headers), line(["-" * width for width in widths]), *map(line, rows)]


def _ping_medians(latencies: Sequence[Latency]) -> dict[str, float]:
    return {row.store: row.median_us for row in latencies if row.name.startswith("PING")}


def latency_lines(latencies: Sequence[Latency]) -> list[str]:
    """The latency table; "x PING" is the median over the same client's PING median."""
    pings = _ping_medians(latencies)
    headers = [
        *("operation", "store", "n", "median µs", "p90 µs", "p99 µs"),
        *("ops/s", "redis µs", "x PING", "GC gen2"),
    ]
    rows = []
    for row in latencies:
        ping = pings.get(row.store)
        rows.append(
            [
                row.name,
                row.store,
                f"{row.iterations:,}",
                _us(row.median_us),
                _us(row.p90_us),
                _us(row.p99_us),
                f"{row.ops_per_s:,.0f}",
                _us(row.redis_us),
                "-" if ping is None else f"{row.median_us / ping:.1f}",
                str(row.gc_gen2),
            ]
        )
    return _table(headers, rows)


def memory_lines(chain: ChainMemory, storage: StorageMemory) -> list[str]:
    """Python allocation of a chain read, and Redis memory per stored message."""
    per_message = storage.used_memory_delta / storage.messages
    keys_per_1k = storage.key_bytes * 1_000 / storage.messages
    content_per_1k = storage.content_bytes * 1_000 / storage.messages
    return [
        f"Python, get_chain of {chain.messages:,} messages (tracemalloc):",
        f"  peak allocation  {chain.peak_bytes / MIB:7.2f} MiB"
        f"  ({chain.peak_bytes / chain.messages:,.0f} B per message)",
        f"  retained result  {chain.retained_bytes / MIB:7.2f} MiB"
        f"  ({chain.retained_bytes / chain.messages:,.0f} B per message)",
        f"  content          {chain.content_bytes / MIB:7.2f} MiB"
        f"  ({chain.content_bytes / chain.messages:,.0f} B per message)",
        f"Redis, {storage.messages:,} messages of 200-500 characters stored:",
        f"  used_memory delta  {storage.per_1k / 1024:,.0f} KiB per 1,000 messages"
        f"  ({per_message:,.0f} B per message)",
        f"  MEMORY USAGE of the chat's keys  {keys_per_1k / 1024:,.0f} KiB per 1,000 messages",
        f"  message content  {content_per_1k / 1024:,.0f} KiB per 1,000 messages",
    ]


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{name} {count}" for name, count in sorted(counts.items())) or "-"


def command_lines(commands: Sequence[CommandCount]) -> list[str]:
    """Client-side sends against the server's INFO commandstats delta, per operation."""
    headers = [
        "operation",
        "round trips",
        "sent",
        "cmdstat_evalsha",
        "run inside the script",
        "redis µs",
    ]
    rows = [
        [
            count.operation,
            str(count.round_trips),
            _counts(count.sent),
            str(count.evalsha_calls),
            _counts(count.in_scripts),
            str(count.redis_us),
        ]
        for count in commands
    ]
    return _table(headers, rows)


def render(results: Results) -> str:
    """The full plain-text report."""
    env = results.environment
    lines = [
        f"ctxstore benchmark, {env['date']} ({env['mode']} run)",
        f"{env['machine']}; Python {env['python']}, redis-py {env['redis_py']}"
        f" ({env['parser']}), redis-server {env['redis_server']}, fakeredis {env['fakeredis']}",
        f"{env['placement']}; load average {env['load_average']}",
        "",
        "Latency per call, one sequential caller (µs; ops/s = calls / total time)",
        *latency_lines(results.latencies),
        "",
        "Memory",
        *memory_lines(results.chain_memory, results.storage),
        "",
        "Commands per operation (client: what it sent; server: INFO commandstats delta)",
        *command_lines(results.commands),
    ]
    return "\n".join(lines)


def write_json(results: Results, path: Path) -> None:
    """Every figure, machine-readable; per-1,000 storage is included precomputed."""
    data = asdict(results)
    data["storage"]["used_memory_per_1k"] = results.storage.per_1k
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
