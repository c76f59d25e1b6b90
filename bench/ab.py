"""Two checkouts of ctxstore, measured against each other in the same run, interleaved.

    python bench/ab.py --a /path/to/other/checkout [--b .] [--rounds 30] [--batch 10]

A change that must not cost the hot path more than some bound (a warm read within 10 % of the
release before it) is judged by a ratio of two figures taken on the same server, in the same
minutes, side by side: each checkout runs in its own process (``PYTHONPATH=<checkout>/src``,
its own Lua scripts), both serve the same private redis-server, and the driver alternates them,
a batch of calls at a time (A, B, B, A, ...), so noise that lands on the machine lands on
both. Every call is timed inside its process, with a ``PING`` of that process's client right
before it (the floor, and the settle round trip). The report gives, per scenario, each side's
median in microseconds, its ratio to its own ``PING``, and B/A of the medians.

Scenarios (each on chats of ``--length`` messages, 10,000 by default, built by each side for
itself with one writer store that appends a message before each timed call, as another
worker does):

* ``warm read``: ``store.load_branch`` by a store that read the chat before;
* ``warm read + touch all``: the same, then every message and its payload handed out (what a
  caller that iterates the chain pays; a side whose reads copy lazily pays for it here);
* ``warm resolve``: ``engine.resolve()`` of an engine that resolved before;
* ``save``: ``store.append`` of one message onto the head the last append returned.

Only calls both sides have are used (``user_id=`` on every chat call).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SCENARIOS = ("warm read", "warm read + touch all", "warm resolve", "save")

WORKER = r"""
import json, sys, time
import ctxstore
from workload import USER_ID, build_pool, messages

url, namespace, length, calls = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
now = time.perf_counter_ns
writer = ctxstore.connect(url, namespace=namespace)
reader = ctxstore.connect(url, namespace=namespace)
ping = reader.client.ping
pools = {name: build_pool(writer, f"{name[:4]}-{i}", length, calls)
         for i, name in enumerate(("read", "touch", "resolve", "save"))}
engines = {}
for chat in pools["resolve"].chats:
    engines[chat.chat_id] = ctxstore.ContextEngine(store=reader, chat_id=chat.chat_id,
                                                   user_id=USER_ID)
    engines[chat.chat_id].resolve()
for name in ("read", "touch"):
    for chat in pools[name].chats:
        reader.load_branch(chat.chat_id, user_id=USER_ID)


def advance(pool):
    chat = pool.take()
    result = writer.append(chat.chat_id, "main", messages(1, chat.length),
                           expected_head=chat.head, user_id=USER_ID)
    chat.head, chat.length = result.head_message_id, chat.length + 1
    return chat


def touch_all(chain):
    for item in chain.messages:
        item["message"]


def one(name):
    if name == "save":
        chat = pools["save"].take()
        ping()
        start = now()
        result = reader.append(chat.chat_id, "main", messages(1, chat.length),
                               expected_head=chat.head, user_id=USER_ID)
        took = now() - start
        chat.head, chat.length = result.head_message_id, chat.length + 1
    else:
        chat = advance(pools[{"warm read": "read", "warm read + touch all": "touch",
                              "warm resolve": "resolve"}[name]])
        ping()
        start = now()
        if name == "warm resolve":
            engines[chat.chat_id].resolve()
        else:
            chain = reader.load_branch(chat.chat_id, user_id=USER_ID)
            if name == "warm read + touch all":
                touch_all(chain)
        took = now() - start
    start = now()
    ping()
    return took, now() - start


print("ready", flush=True)
for line in sys.stdin:
    name, count = line.rstrip("\n").rsplit(" ", 1)
    print(json.dumps([one(name) for _ in range(int(count))]), flush=True)
"""


def spawn(checkout: Path, url: str, namespace: str, length: int, calls: int) -> Any:
    environment = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(checkout / "src"), str(HERE)]),
    }
    process = subprocess.Popen(
        [sys.executable, "-c", WORKER, url, namespace, str(length), str(calls)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=environment,
    )
    assert process.stdout is not None
    if process.stdout.readline().strip() != "ready":
        raise SystemExit(f"the worker of {checkout} did not start")
    return process


def ask(process: Any, scenario: str, count: int) -> list[tuple[int, int]]:
    process.stdin.write(f"{scenario} {count}\n")
    process.stdin.flush()
    return [tuple(pair) for pair in json.loads(process.stdout.readline())]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--a", type=Path, required=True, help="the checkout to compare with")
    parser.add_argument("--b", type=Path, default=HERE.parent, help="this checkout (default)")
    parser.add_argument("--length", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--batch", type=int, default=10)
    options = parser.parse_args()
    sys.path.insert(0, str(HERE))
    from local_redis import start_server, stop

    calls = options.rounds * options.batch * 2 + 10
    with tempfile.TemporaryDirectory() as directory:
        server, port = start_server(Path(directory))
        url = f"redis://127.0.0.1:{port}"
        try:
            sides = {
                "A": spawn(options.a.resolve(), url, "ab-a", options.length, calls),
                "B": spawn(options.b.resolve(), url, "ab-b", options.length, calls),
            }
            timings: dict[tuple[str, str], list[tuple[int, int]]] = {}
            for scenario in SCENARIOS:
                for process in sides.values():  # warm-up, not counted
                    ask(process, scenario, options.batch)
                for round_number in range(options.rounds):
                    order = ("A", "B") if round_number % 2 == 0 else ("B", "A")
                    for side in order:
                        timings.setdefault((scenario, side), []).extend(
                            ask(sides[side], scenario, options.batch)
                        )
            for process in sides.values():
                process.stdin.close()
                process.wait(timeout=30)
        finally:
            stop(server)
    print(f"A: {options.a}  B: {options.b}  chats of {options.length:,} messages")
    print(f"{'scenario':26} {'A µs':>9} {'A/PING':>7} {'B µs':>9} {'B/PING':>7} {'B/A':>6}")
    for scenario in SCENARIOS:
        row = []
        for side in ("A", "B"):
            pairs = timings[(scenario, side)]
            call = statistics.median(took for took, _ in pairs) / 1000
            ping = statistics.median(floor for _, floor in pairs) / 1000
            row.append((call, call / ping))
        (a, a_ping), (b, b_ping) = row
        print(f"{scenario:26} {a:9.1f} {a_ping:7.2f} {b:9.1f} {b_ping:7.2f} {b / a:6.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
