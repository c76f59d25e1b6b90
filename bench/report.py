"""Rendering the tables: plain text for the terminal, Markdown for the written report."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from results import Results
from tables import Table, all_tables


def _text_table(table: Table) -> list[str]:
    """Columns padded to their widest cell; the first column left-aligned, the rest right."""
    if not table.headers:
        return [f"{table.title}: {'; '.join(table.notes)}"]
    cells = [table.headers, *table.rows]
    widths = [max(len(row[index]) for row in cells) for index in range(len(table.headers))]

    def line(row: Sequence[str]) -> str:
        first = row[0].ljust(widths[0])
        rest = (cell.rjust(width) for cell, width in zip(row[1:], widths[1:], strict=True))
        return "  ".join([first, *rest]).rstrip()

    rule = line(["-" * width for width in widths])
    return [table.title, line(table.headers), rule, *map(line, table.rows), *table.notes]


def _markdown_table(table: Table) -> list[str]:
    if not table.headers:
        return [f"### {table.title}", "", *table.notes]

    def line(row: Sequence[str]) -> str:
        return "| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |"

    align = ["---", *("---:" for _ in table.headers[1:])]
    notes = [f"* {note}" for note in table.notes]
    return [
        f"### {table.title}",
        "",
        line(table.headers),
        line(align),
        *map(line, table.rows),
        *(["", *notes] if notes else []),
    ]


def header_lines(env: dict[str, Any]) -> list[str]:
    versions = env["versions"]
    peers = ", ".join(
        f"{name} {version}"
        for name, version in versions.items()
        if name not in {"ctxstore", "redis", "hiredis", "msgpack", "fakeredis", "pydantic"}
        and version is not None
    )
    return [
        f"ctxstore benchmark, {env['date']} ({env['mode']} run), commit {env['git_commit']}",
        f"{env['cpu_count']} CPUs ({env['cpus_available']} usable), {env['machine']}, loopback;"
        f" Python {env['python']}, redis-py {versions['redis']} ({env['parser']}),"
        f" redis-server {env['redis_server']}, fakeredis {versions['fakeredis']}",
        f"{env['placement']}; {env['cache']}",
        f"load average {env['load_average_start']} at start, {env.get('load_average_end')} at end;"
        f" {env.get('duration_s', 0):,.0f} s",
        f"peers: {peers or 'none installed'}",
    ]


def render_text(results: Results) -> str:
    lines = header_lines(results.environment)
    for table in all_tables(results):
        lines += ["", *_text_table(table)]
    return "\n".join(lines)


def render_markdown(results: Results, plots: Sequence[Path] = ()) -> str:
    lines = [
        "# ctxstore benchmark report",
        "",
        *(f"* {line}" for line in header_lines(results.environment)),
    ]
    lines += [
        "",
        "Ratios are medians over medians from the same interleaved loop; see bench/README.md.",
    ]
    for table in all_tables(results):
        lines += ["", *_markdown_table(table)]
    if plots:
        lines += ["", "## Plots", ""]
        lines += [f"![{path.stem}]({path.as_posix()})" for path in plots]
    return "\n".join(lines) + "\n"


def write_markdown(results: Results, path: Path, plots: Sequence[Path] = ()) -> None:
    relative = [_relative(plot, path.parent) for plot in plots]
    path.write_text(render_markdown(results, relative), encoding="utf-8")


def _relative(plot: Path, folder: Path) -> Path:
    try:
        return plot.resolve().relative_to(folder.resolve())
    except ValueError:
        return plot.resolve()
