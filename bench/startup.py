"""Start-up cost in fresh interpreters: ``import ctxstore`` and a new process's first save.

Serverless functions and short-lived workers pay this on every cold start. ``import redis`` is
the floor (ctxstore needs it anyway) and ``python -c pass`` the interpreter alone; the three
commands run interleaved, one of each per round, so machine noise hits them alike. The first
save is timed inside the child, from before ``import ctxstore`` to after the append returns
(connect, server checks, script loading, upsert_chat, append of one message), and printed.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from time import perf_counter_ns

from results import Skipped
from stores import NAMESPACE
from timing import Stat, summarize

SCENARIO_IMPORT = "import_time"
SCENARIO_FIRST_SAVE = "first_save"

_FIRST_SAVE = """
import sys, time
start = time.perf_counter_ns()
import ctxstore
imported = time.perf_counter_ns()
store = ctxstore.connect(sys.argv[1], namespace=sys.argv[2])
store.upsert_chat(sys.argv[3], "bench-user")
store.append(sys.argv[3], "main", [{"role": "user", "content": sys.argv[4]}], expected_head=None)
print(imported - start, time.perf_counter_ns() - start)
"""

COMMANDS = {
    "python -c pass": "pass",
    "import redis": "import redis",
    "import ctxstore": "import ctxstore",
}


@dataclass(frozen=True)
class ImportTime:
    runs: int
    stats: dict[str, Stat]
    ratio_ctxstore_to_redis: float
    ctxstore_minus_interpreter_ms: float


@dataclass(frozen=True)
class FirstSave:
    """Timed in the child: ``total`` from before the import to after the append, of which
    ``import_part`` is ``import ctxstore``; ``ratio_total_to_import`` compares their medians."""

    runs: int
    total: Stat
    import_part: Stat
    ratio_total_to_import: float


def _wall_ns(arguments: list[str]) -> int:
    start = perf_counter_ns()
    subprocess.run(arguments, check=True, stdout=subprocess.DEVNULL)
    return perf_counter_ns() - start


def _first_save_ns(url: str, run: int, text: str) -> tuple[int, int]:
    """(import ns, total ns) as the child measured them."""
    arguments = [sys.executable, "-c", _FIRST_SAVE, url, NAMESPACE, f"first-save-{run}", text]
    done = subprocess.run(arguments, check=True, capture_output=True, text=True)
    imported, total = done.stdout.strip().splitlines()[-1].split()
    return int(imported), int(total)


def startup(url: str | None, runs: int, text: str) -> tuple[ImportTime, FirstSave | Skipped]:
    """``runs`` rounds of (pass, import redis, import ctxstore, first save), rotated."""
    samples: dict[str, list[int]] = {name: [] for name in COMMANDS}
    saves: list[tuple[int, int]] = []
    names = list(COMMANDS)
    _wall_ns([sys.executable, "-c", "import ctxstore"])  # warm the OS file cache
    for run in range(runs):
        shift = run % len(names)
        for name in names[shift:] + names[:shift]:
            samples[name].append(_wall_ns([sys.executable, "-c", COMMANDS[name]]))
        if url is not None:
            saves.append(_first_save_ns(url, run, text))
    stats = {name: summarize(values) for name, values in samples.items()}
    imports = ImportTime(
        runs=runs,
        stats=stats,
        ratio_ctxstore_to_redis=stats["import ctxstore"].median_us
        / stats["import redis"].median_us,
        ctxstore_minus_interpreter_ms=(
            stats["import ctxstore"].median_us - stats["python -c pass"].median_us
        )
        / 1_000,
    )
    if not saves:
        return imports, Skipped("no Redis server")
    total = summarize([whole for _, whole in saves])
    imported = summarize([part for part, _ in saves])
    return imports, FirstSave(
        runs=runs,
        total=total,
        import_part=imported,
        ratio_total_to_import=total.median_us / imported.median_us,
    )
