"""Where the append script's Redis time goes: the script cut short at each phase, timed.

Each variant is lua/append.lua's full source (library included) with an early return inserted
at one point of its body; a variant that returns before the writes changes nothing, so it runs
again and again on the same head, each call with the arguments of a new save (built by the
store's own append operation: new tags, a new request id, as a real save sends). The time
per call of each variant comes from ``INFO commandstats``, in blocks that rotate, on a private
redis-server; the differences between consecutive variants are what each phase costs. The
last row is the whole script (a real save each call).

``python bench/lua_profile.py [--blocks N] [--per-block K] [--length L]``
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import redis

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import ctxstore
from ctxstore._core.ops.append import append
from ctxstore._core.scripts import load_script

from redis_info import command_stats
from workload import build_chat

#: (phase, the line of lua/append.lua before which the variant returns)
CUTS = [
    ("EVALSHA of 'return 0' with the same arguments", None),
    ("+ the library's definitions", "  local chat, log, alias, runs, branch = KEYS[1]"),
    ("+ call fields, the chat's identity and fields", "  if target == '' then\n"),
    ("+ the branch record and the head's record", "  -- A resend of a call that succeeded"),
    ("+ fence, retention, counters, LLEN, token length", "  local entries = {}\n"),
    ("+ phase 1 (token entries, ids, compaction)", "  -- Phase 2: write.\n"),
    ("+ the writes and the reply (the whole script)", ""),
]


def variants() -> list[tuple[str, str]]:
    source = load_script("append").source
    out = []
    for phase, anchor in CUTS:
        if anchor is None:
            out.append((phase, "return 0"))
        elif anchor == "":
            out.append((phase, source))
        else:
            at = source.index(anchor)
            out.append((phase, source[:at] + "  if KEYS[1] then return 0 end\n" + source[at:]))
    return out


def main() -> None:
    from local_redis import local_redis
    from pinning import pin_to_one_cpu

    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--blocks", type=int, default=12)
    parser.add_argument("--per-block", type=int, default=300)
    parser.add_argument("--length", type=int, default=1000)
    args = parser.parse_args()
    pin_to_one_cpu()
    with local_redis() as server:
        store = ctxstore.connect(  # the scripts' path: the variants are scripts too
            server.url, namespace="lp", scripting="scripts"
        ).admin()  # an operator's benchmark: every user's chats
        plain = redis.Redis.from_url(server.url)
        stats = redis.Redis.from_url(server.url)
        head = build_chat(store, "c", args.length).head
        shas = []
        for _, source in variants():
            shas.append(plain.script_load(source))

        def one_call() -> tuple[tuple[str, ...], tuple[object, ...]]:
            operation = append(
                store.state,
                "c",
                "main",
                [{"role": "user", "content": "x" * 200}],
                expected_head=head,
            )
            call = next(operation)
            return call.keys, call.args

        keys, argv = one_call()
        samples: list[list[float]] = [[] for _ in shas]
        for block in range(args.blocks):
            order = list(range(len(shas)))
            order = order[block % len(order) :] + order[: block % len(order)]
            for index in order:
                before = command_stats(stats)
                for _ in range(args.per_block):
                    if index == len(shas) - 1:  # a real save: the head moves on
                        head = store.append(
                            "c",
                            "main",
                            [{"role": "user", "content": "x" * 200}],
                            expected_head=head,
                        ).head_message_id
                    else:
                        keys, argv = one_call()
                        plain.evalsha(shas[index], len(keys), *keys, *argv)
                if index == len(shas) - 1:
                    keys, argv = one_call()
                spent = command_stats(stats).minus(before)
                samples[index].append(spent.server_usec() / max(1, spent.script_calls()))
        previous = 0.0
        print(f"append of one message at chain length {args.length:,}: Redis time per call")
        for (phase, _), values in zip(CUTS, samples, strict=True):
            median = statistics.median(values)
            print(f"  {phase:<52} {median:6.1f} us  (+{median - previous:5.1f})")
            previous = median
        store.close()


if __name__ == "__main__":
    main()
