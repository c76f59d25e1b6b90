"""Benchmark ctxstore: ``python bench/run.py [--quick | --smoke] [--no-cluster] [--no-peers]``.

Starts a private redis-server on a free loopback port (and a private 3-master cluster for the
cluster scenarios), runs every scenario with its floors interleaved, prints the report on
stdout, and writes it as JSON, Markdown and PNG plots. Progress goes to stderr. See
bench/README.md for what each figure means.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any, TypeVar

from environment import environment, load_average
from local_cluster import local_cluster
from local_redis import local_redis
from long_context import COMPACTION, long_context
from long_context import SCENARIO as LONG_CONTEXT
from longest_call import SCENARIO as LONGEST
from longest_call import longest_calls
from memory_use import SCENARIO as MEMORY
from memory_use import SCENARIO_BURST as MEMORY_BURST
from memory_use import memory_per_message
from peer_runs import SCENARIO as PEERS
from peer_runs import run_peers
from pinning import pin_to_one_cpu
from plots import draw, matplotlib_missing
from reads import COLD, WARM, read_rows
from redis_time import SCENARIO as REDIS_TIME
from redis_time import redis_time
from report import render_text, write_markdown
from results import Results, Skipped, write_json
from saves import SCENARIO as SAVE
from saves import save_rows
from scale import FULL, QUICK, SMOKE, Scale
from startup import SCENARIO_FIRST_READ, SCENARIO_FIRST_SAVE, SCENARIO_IMPORT, first_read, startup
from stores import open_store
from targets import Target
from workload import messages
from writers import SCENARIO as WRITERS
from writers import throughput

T = TypeVar("T")
OUT = Path(__file__).resolve().parent / "out"
#: Every scenario the JSON holds (a scenario that did not run holds its reason).
SCENARIOS = (
    SAVE,
    COLD,
    WARM,
    LONGEST,
    WRITERS,
    MEMORY,
    MEMORY_BURST,
    REDIS_TIME,
    LONG_CONTEXT,
    COMPACTION,
    SCENARIO_IMPORT,
    SCENARIO_FIRST_SAVE,
    SCENARIO_FIRST_READ,
    "cluster",
    "embedded",
    PEERS,
)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer iterations: a smoke run")
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="tiny sizes (N up to 1,000), no cluster, no peers: proves every scenario runs"
        " (wins over --quick)",
    )
    parser.add_argument("--json", type=Path, metavar="PATH", default=OUT / "results.json")
    parser.add_argument("--markdown", type=Path, metavar="PATH", default=OUT / "report.md")
    parser.add_argument("--plots", type=Path, metavar="DIR", default=OUT / "plots")
    parser.add_argument("--no-cluster", action="store_true", help="skip the cluster scenarios")
    parser.add_argument("--no-peers", action="store_true", help="skip the peer designs")
    parser.add_argument(
        "--unpinned",
        action="store_true",
        help="let the OS place client and server (default: both on the last CPU)",
    )
    return parser.parse_args(argv)


def say(line: str) -> None:
    print(f"... {line}", file=sys.stderr, flush=True)


class Stages:
    """Runs named stages with a progress line each, and keeps how long each took."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def run(self, label: str, work: Callable[[], T]) -> T:
        say(label)
        start = time.perf_counter()
        try:
            return work()
        finally:
            self.seconds[label] = round(time.perf_counter() - start, 2)


def side_scenarios(target: Target, scale: Scale) -> list[Any]:
    """Save, cold read and warm read at the side length, on the cluster or memory://."""
    store = open_store(target.url)
    try:
        length = scale.side_length
        count = scale.side_iterations
        rows: list[Any] = save_rows(target, store, (length,), count, scale.warmup(count))
        cold, warm = read_rows(target, store, (length,), {length: count}, scale.warmup)
        return rows + cold + warm
    finally:
        store.close()


def standalone(results: Results, url: str, scale: Scale, stages: Stages, peers: bool) -> None:
    """Every scenario that runs on the private standalone server."""
    target = Target("redis", url)
    store = open_store(url)
    found = results.scenarios
    try:
        found[SAVE] = stages.run(
            "save at each N (store.append, engine.save)",
            lambda: save_rows(
                target,
                store,
                scale.lengths,
                scale.save_iterations,
                scale.warmup(scale.save_iterations),
            ),
        )
        found[COLD], found[WARM] = stages.run(
            "cold and warm reads at each N",
            lambda: read_rows(target, store, scale.lengths, scale.read_iterations, scale.warmup),
        )
        found[LONGEST] = stages.run(
            "longest single Redis command",
            lambda: longest_calls(
                target,
                store,
                scale.long_read_length,
                scale.long_reads,
                scale.long_append_size,
                scale.long_appends,
            ),
        )
        found[WRITERS] = stages.run(
            "concurrent writers",
            lambda: throughput(
                url, scale.writer_counts, scale.appends_per_writer, scale.writer_repeats
            ),
        )
        found[MEMORY] = stages.run(
            "Redis memory per message",
            lambda: memory_per_message(target, store, scale.memory_messages, scale.memory_batch),
        )
        found[MEMORY_BURST] = stages.run(
            "Redis memory after a burst of one-message saves",
            lambda: memory_per_message(target, store, scale.memory_messages, 1),
        )
        found[REDIS_TIME] = stages.run(
            "Redis time per save and per read (commandstats A/B)",
            lambda: redis_time(url, scale.side_length, scale.redis_time_blocks, 200),
        )
        found[LONG_CONTEXT], found[COMPACTION] = stages.run(
            "token windows, counting at save, compaction",
            lambda: long_context(
                target,
                store,
                scale.lengths[-1],
                scale.read_iterations[scale.lengths[-1]] * 5,
                scale.warmup(scale.read_iterations[scale.lengths[-1]]),
            ),
        )
        found[SCENARIO_IMPORT], found[SCENARIO_FIRST_SAVE] = stages.run(
            "import time and first save in fresh interpreters",
            lambda: startup(url, scale.import_runs, messages(1)[0]["content"]),
        )
        found[SCENARIO_FIRST_READ] = stages.run(
            "a fresh process's first read",
            lambda: first_read(url, store, scale.import_runs, scale.side_length),
        )
        if peers:
            found[PEERS] = stages.run(
                "peers",
                lambda: run_peers(
                    url,
                    store,
                    scale.side_length,
                    scale.side_iterations,
                    scale.warmup(scale.side_iterations),
                    say,
                ),
            )
    finally:
        store.close()


def measure(args: argparse.Namespace, scale: Scale, placement: str) -> Results:
    load_before = load_average()
    stages = Stages()
    started = time.perf_counter()
    with local_redis() as server:
        results = Results(
            environment(scale.name, placement, server.version, load_before),
            dict(vars(scale)),
        )
        peers = not (args.no_peers or args.smoke)
        standalone(results, server.url, scale, stages, peers)
    if not peers:
        reason = "--smoke" if args.smoke else "--no-peers"
        say(f"skipping peers ({reason})")
        results.scenarios[PEERS] = Skipped(reason)
    results.scenarios["embedded"] = stages.run(
        "embedded store (memory://)",
        lambda: side_scenarios(Target("memory", "memory://bench"), scale),
    )
    if args.no_cluster or args.smoke:
        reason = "--smoke" if args.smoke else "--no-cluster"
        say(f"skipping the cluster ({reason})")
        results.scenarios["cluster"] = Skipped(reason)
    else:
        with ExitStack() as stack:
            cluster = stages.run(
                "starting a 3-master cluster", lambda: stack.enter_context(local_cluster())
            )
            results.scenarios["cluster"] = stages.run(
                "cluster scenarios", lambda: side_scenarios(Target("cluster", cluster.url), scale)
            )
    results.environment["load_average_end"] = load_average()
    results.environment["duration_s"] = round(time.perf_counter() - started, 1)
    results.environment["stage_seconds"] = stages.seconds
    return results


def write_outputs(results: Results, args: argparse.Namespace) -> None:
    """JSON, then the plots (when matplotlib is there), then the Markdown that shows them."""
    args.json.parent.mkdir(parents=True, exist_ok=True)
    write_json(results, args.json)
    say(f"wrote {args.json}")
    missing = matplotlib_missing()
    plots: list[Path] = []
    if missing is not None:
        say(missing)
    else:
        plots = draw(results, args.plots)
        say(f"wrote {len(plots)} plots in {args.plots}")
    args.markdown.parent.mkdir(parents=True, exist_ok=True)
    write_markdown(results, args.markdown, plots)
    say(f"wrote {args.markdown}")


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    scale = SMOKE if args.smoke else QUICK if args.quick else FULL
    placement = "unpinned" if args.unpinned else pin_to_one_cpu()
    results = measure(args, scale, placement)
    missing = [name for name in SCENARIOS if name not in results.scenarios]
    if missing:
        raise RuntimeError(f"scenarios missing from the results: {missing}")
    print(render_text(results))
    write_outputs(results, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
