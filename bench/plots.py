"""PNG plots: latency against chain length, and throughput against the number of writers.

matplotlib is optional (the ``bench`` extra): without it the run prints one line and goes on.
The latency plot shows each operation's median with its floor's median from the same loop as a
dashed line of the same colour, so the gap is visible at every length.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from results import Results, Timed
from writers import Throughput, WriterResults


def matplotlib_missing() -> str | None:
    """None when plots can be drawn, else the one-line reason."""
    try:
        import matplotlib
    except ImportError:
        return "matplotlib is not installed (pip install -e '.[bench]'): no plots"
    matplotlib.use("Agg")
    return None


def _latency(rows: Sequence[Timed], path: Path) -> Path:
    import matplotlib.pyplot as plt

    series: dict[tuple[str, str], list[Timed]] = {}
    for row in rows:
        series.setdefault((row.scenario, row.operation), []).append(row)
    figure, axis = plt.subplots(figsize=(9, 6))
    for (scenario, operation), unordered in series.items():
        points = sorted(unordered, key=lambda row: row.length)
        lengths = [row.length for row in points]
        line = axis.plot(
            lengths,
            [row.call.median_us for row in points],
            marker="o",
            label=f"{scenario}: {operation}",
        )[0]
        axis.plot(
            lengths,
            [row.floors[row.ratio_floor].median_us for row in points],
            linestyle="--",
            color=line.get_color(),
            alpha=0.6,
            label=f"  floor: {re.sub(r' [0-9,]+', ' N', points[0].ratio_floor)}",
        )
    axis.set_xscale("log")
    axis.set_yscale("log")
    axis.set_xlabel("messages on the chain (N)")
    axis.set_ylabel("median µs per call")
    axis.set_title("ctxstore latency against chain length (dashed: floor in the same loop)")
    axis.grid(True, which="both", alpha=0.3)
    axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def _throughput(found: Sequence[Throughput], path: Path) -> Path:
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(7, 5))
    for shared, label in ((False, "one chat per writer"), (True, "all writers on one chat")):
        points = sorted(
            (item for item in found if item.shared_chat == shared), key=lambda i: i.writers
        )
        axis.plot(
            [item.writers for item in points],
            [item.appends_per_s for item in points],
            marker="o",
            label=label,
        )
    axis.set_xlabel("writer processes")
    axis.set_ylabel("appends per second (all writers)")
    axis.set_title("Throughput of 1-message appends (on_conflict=rebase)")
    axis.set_ylim(bottom=0)
    axis.grid(True, alpha=0.3)
    axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def draw(results: Results, folder: Path) -> list[Path]:
    """Both plots into ``folder``; returns their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = [*results.rows("save"), *results.rows("cold_read"), *results.rows("warm_read")]
    drawn = [_latency(rows, folder / "latency_vs_length.png")]
    writers = results.scenarios.get("writers")
    if isinstance(writers, WriterResults):
        drawn.append(_throughput(writers.configurations, folder / "throughput_vs_writers.png"))
    return drawn
