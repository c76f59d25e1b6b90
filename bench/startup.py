"""Start-up cost in fresh interpreters: ``import ctxstore`` and a new process's first save.

Serverless functions and short-lived workers pay this on every cold start. ``import redis`` is
the floor (ctxstore needs it anyway) and ``python -c pass`` the interpreter alone; the three
commands run interleaved, one of each per round, so machine noise hits them alike. The first
save is timed inside the child, from before ``import ctxstore`` to after the append returns
(connect, server checks, script loading, upsert_chat, append of one message), and printed.

The cold save against its floor: a fresh process's append of one message to an existing chat,
counting its tokens exactly (``o200k_base``, the default), from before the first import to the
reply; against the same save by hand: ``import redis, msgpack``, connect, one ``EVAL`` of the
floor script writing the same record (bench/redis_time.py's ``FLOOR``). Both in fresh
interpreters from cached bytecode, alternating.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from time import perf_counter_ns
from typing import Any

from results import Skipped
from stores import NAMESPACE
from timing import Stat, summarize
from workload import build_chat

SCENARIO_IMPORT = "import_time"
SCENARIO_FIRST_SAVE = "first_save"
SCENARIO_FIRST_READ = "first_read"

_FIRST_SAVE = """
import sys, time
start = time.perf_counter_ns()
import ctxstore
imported = time.perf_counter_ns()
store = ctxstore.connect(sys.argv[1], namespace=sys.argv[2])
store.upsert_chat(sys.argv[3], "bench-user")
store.append(sys.argv[3], "main", [{"role": "user", "content": sys.argv[4]}], expected_head=None,
             user_id="bench-user")
print(imported - start, time.perf_counter_ns() - start)
"""

#: A fresh process's first read of a chain (the serverless cold path): timed from after the
#: imports to after the read, so the ratio is of the work, not of the interpreter. ``store``:
#: connect, server checks, script load, ``load_branch``; ``floor``: the same read by hand
#: (a redis-py client, ``LRANGE`` of the log, ``msgpack.unpackb`` of each record).
_FIRST_READ = """
import sys, time
import ctxstore, msgpack, redis
ctxstore.connect, ctxstore.Store  # the store's modules load on first use: import time
url, namespace, chat, kind = sys.argv[1:5]
start = time.perf_counter_ns()
if kind == "store":
    store = ctxstore.connect(url, namespace=namespace)
    count = len(store.load_branch(chat, user_id="bench-user").messages)
else:
    client = redis.Redis.from_url(url)
    key = "ctx:" + namespace + ":{" + chat + "}:log"
    count = len([msgpack.unpackb(item) for item in client.lrange(key, 0, -1)])
print(count, time.perf_counter_ns() - start)
"""

#: The cold save: a fresh process's append to an existing chat (the store's way), timed from
#: before the first import to the reply.
_COLD_SAVE = """
import sys, time
start = time.perf_counter_ns()
import ctxstore
store = ctxstore.connect(sys.argv[1], namespace=sys.argv[2])
store.append(sys.argv[3], "main", [{"role": "user", "content": sys.argv[4]}], expected_head=None,
             on_conflict="rebase", user_id="bench-user")
print(time.perf_counter_ns() - start)
"""

#: The same save by hand: redis-py and msgpack, one EVAL of the floor script.
_COLD_SAVE_BY_HAND = """
import sys, time
start = time.perf_counter_ns()
import msgpack, redis
client = redis.Redis.from_url(sys.argv[1])
now = time.time_ns() // 1_000_000
record = msgpack.packb([-2, now, {"role": "user", "content": sys.argv[4]}, None, "abcdef"])
keys = [f"bench-hand:{{h}}:{name}" for name in ("chat", "branch", "log", "req", "i1", "i2")]
client.eval(sys.argv[5], 6, *keys, record, "head", now, f"r{now}")
print(time.perf_counter_ns() - start)
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
    #: The cold save (an append to an existing chat, exact counting) and the same by hand.
    cold_save: Stat | None = None
    by_hand: Stat | None = None

    @property
    def cold_x_by_hand(self) -> float:
        if self.cold_save is None or self.by_hand is None:
            return float("nan")
        return self.cold_save.median_us / self.by_hand.median_us


@dataclass(frozen=True)
class FirstRead:
    """A fresh process's first ``load_branch`` of ``length`` messages (connect included)
    against connect + ``LRANGE`` + ``unpackb`` by hand, each in its own fresh process."""

    runs: int
    length: int
    store: Stat
    floor: Stat
    ratio: float


def _child_env() -> dict[str, str]:
    """The children run as deployed: from cached bytecode (a machine that sets
    PYTHONDONTWRITEBYTECODE would have every child compile every module it imports)."""
    return {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}


def _first_read_ns(url: str, chat: str, kind: str, length: int) -> int:
    arguments = [sys.executable, "-c", _FIRST_READ, url, NAMESPACE, chat, kind]
    done = subprocess.run(arguments, check=True, capture_output=True, text=True, env=_child_env())
    count, elapsed = done.stdout.strip().splitlines()[-1].split()
    if int(count) != length:
        raise RuntimeError(f"the {kind} read found {count} messages, not {length}")
    return int(elapsed)


def first_read(url: str, store: Any, runs: int, length: int) -> FirstRead:
    """``runs`` rounds of (store read, floor read) in fresh processes, alternating order."""
    chat = build_chat(store, f"first-read-{length}", length).chat_id
    samples: dict[str, list[int]] = {"store": [], "floor": []}
    _first_read_ns(url, chat, "store", length)  # bytecode written, OS file cache warm
    for run in range(runs):
        for kind in ("store", "floor") if run % 2 == 0 else ("floor", "store"):
            samples[kind].append(_first_read_ns(url, chat, kind, length))
    store_stat, floor_stat = summarize(samples["store"]), summarize(samples["floor"])
    return FirstRead(
        runs, length, store_stat, floor_stat, store_stat.median_us / floor_stat.median_us
    )


def _wall_ns(arguments: list[str]) -> int:
    start = perf_counter_ns()
    subprocess.run(arguments, check=True, stdout=subprocess.DEVNULL, env=_child_env())
    return perf_counter_ns() - start


def _first_save_ns(url: str, run: int, text: str) -> tuple[int, int]:
    """(import ns, total ns) as the child measured them."""
    arguments = [sys.executable, "-c", _FIRST_SAVE, url, NAMESPACE, f"first-save-{run}", text]
    done = subprocess.run(arguments, check=True, capture_output=True, text=True, env=_child_env())
    imported, total = done.stdout.strip().splitlines()[-1].split()
    return int(imported), int(total)


def _cold_save_ns(url: str, kind: str, text: str) -> int:
    """A cold save (``kind`` "store") or the same by hand ("hand"), as the child timed it."""
    from redis_time import FLOOR

    code = _COLD_SAVE if kind == "store" else _COLD_SAVE_BY_HAND
    arguments = [sys.executable, "-c", code, url, NAMESPACE, "cold-save", text, FLOOR]
    done = subprocess.run(arguments, check=True, capture_output=True, text=True, env=_child_env())
    return int(done.stdout.strip().splitlines()[-1])


def startup(url: str | None, runs: int, text: str) -> tuple[ImportTime, FirstSave | Skipped]:
    """``runs`` rounds of (pass, import redis, import ctxstore, first save, cold save and the
    same by hand), rotated."""
    samples: dict[str, list[int]] = {name: [] for name in COMMANDS}
    saves: list[tuple[int, int]] = []
    cold: dict[str, list[int]] = {"store": [], "hand": []}
    names = list(COMMANDS)
    _wall_ns([sys.executable, "-c", "import ctxstore"])  # warm the OS file cache
    if url is not None:
        import ctxstore

        with ctxstore.connect(url, namespace=NAMESPACE) as chats:
            chats.for_user("bench-user").upsert_chat("cold-save")
        for kind in cold:  # bytecode written, the library loaded
            _cold_save_ns(url, kind, text)
    for run in range(runs):
        shift = run % len(names)
        for name in names[shift:] + names[:shift]:
            samples[name].append(_wall_ns([sys.executable, "-c", COMMANDS[name]]))
        if url is not None:
            saves.append(_first_save_ns(url, run, text))
            for kind in ("store", "hand") if run % 2 == 0 else ("hand", "store"):
                cold[kind].append(_cold_save_ns(url, kind, text))
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
        cold_save=summarize(cold["store"]),
        by_hand=summarize(cold["hand"]),
    )
