"""What mirroring a streamed answer into Redis costs: ``engine.stream_turn`` against the same
litellm mock stream iterated bare, interleaved run by run on a private redis-server.

    python bench/streaming.py [--runs 15] [--chars 3000] [--delay-ms 0]

Per run and flavour (sync, async) it times, for the bare stream and for the streamed turn:
the start (``resolve()`` + ``litellm.completion(stream=True)``, against ``stream_turn()``:
resolve, the stream's start, the call), the chunks (first to last, as the caller sees them), and
the end (``save()`` + ``track_usage()`` after the bare stream, against the turn's own end: the
last write, the save, closing the stream, the usage). It prints medians; the per-chunk figure
is (turn - bare) / chunks over the chunks phase. ``--delay-ms`` sleeps before each chunk, as a
model would; ``--replay`` replays the chunks of one mock stream recorded at the start, so
litellm's own cost per chunk (about 150-450 us for its mock) leaves both sides and the turn's
own cost shows. Nothing here is a test: the figures are for docs/streaming.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

from local_redis import local_redis

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import litellm

import ctxstore

MODEL = "gpt-4o-mini"


def answer_of(chars: int) -> str:
    words = ["the", "tram", "climbs", "to", "the", "castle", "while", "the", "river", "turns"]
    text = ""
    while len(text) < chars:
        text += words[len(text) % len(words)] + " "
    return text[:chars]


#: With --replay: the chunks of one mock stream, recorded once and replayed for every run, so
#: the model's own cost per chunk (litellm's mock machinery) drops out of both sides.
RECORDED: list[Any] = []


def slowed(stream: Any, delay: float) -> Any:
    for chunk in RECORDED or stream:
        if delay:
            time.sleep(delay)
        yield chunk


async def aslowed(stream: Any, delay: float) -> Any:
    if RECORDED:
        for chunk in RECORDED:
            if delay:
                await asyncio.sleep(delay)
            yield chunk
        return
    async for chunk in stream:
        if delay:
            await asyncio.sleep(delay)
        yield chunk


def phases(
    start: Callable[[], Any],
    chunks: Callable[[Any], int],
    end: Callable[[], Any],
    stamps: dict[str, float],
) -> dict[str, float]:
    """Start, chunks (until the last chunk reached the caller) and end (from there: the end
    of the model's stream, litellm's own bookkeeping included, and the save)."""
    began = time.perf_counter()
    opened = start()
    started = time.perf_counter()
    count = chunks(opened)
    end()
    ended = time.perf_counter()
    return {
        "start": started - began,
        "chunks": stamps["last"] - started,
        "end": ended - stamps["last"],
        "count": count,
    }


def sync_runs(
    url: str, answer: str, delay: float, run: int
) -> tuple[dict[str, float], dict[str, float]]:
    store = ctxstore.connect(url, namespace=f"bench{run}", estimate_tokens=len)
    stamps: dict[str, float] = {}

    def iterate(stream: Any) -> int:
        count = 0
        for _chunk in stream:
            count += 1
            stamps["last"] = time.perf_counter()
        return count

    bare = ctxstore.ContextEngine(store=store, chat_id="bare", user_id="u")
    bare.set(ctxstore.user("question"))
    holder: dict[str, Any] = {}

    def bare_start() -> Any:
        context = bare.resolve()
        stream = litellm.completion(
            model=MODEL,
            messages=context.with_system(),
            mock_response=answer,
            stream=True,
            stream_options={"include_usage": True},
        )
        holder["chunks"] = []

        def keep() -> Any:
            for chunk in slowed(stream, delay):
                holder["chunks"].append(chunk)
                yield chunk

        return keep()

    def bare_end() -> None:
        built = litellm.stream_chunk_builder(holder["chunks"])
        bare.set(ctxstore.message(built.choices[0].message))
        bare.save()
        bare.track_usage(built.usage)

    def measure_bare() -> dict[str, float]:
        return phases(bare_start, iterate, bare_end, stamps)

    def measure_turn() -> dict[str, float]:
        engine = ctxstore.ContextEngine(store=store, chat_id="turn", user_id="u")
        engine.set(ctxstore.user("question"))
        original = litellm.completion
        litellm.completion = lambda **kw: slowed(original(**kw), delay)  # type: ignore[assignment]
        try:
            return phases(
                lambda: engine.stream_turn(MODEL, mock_response=answer, title=False),
                iterate,
                lambda: None,  # the turn's end runs in its last iteration
                stamps,
            )
        finally:
            litellm.completion = original  # type: ignore[assignment]

    if run % 2:  # which goes first alternates from run to run
        turn_phases, bare_phases = measure_turn(), measure_bare()
    else:
        bare_phases, turn_phases = measure_bare(), measure_turn()
    store.close()
    return bare_phases, turn_phases


async def async_runs(
    url: str, answer: str, delay: float, run: int
) -> tuple[dict[str, float], dict[str, float]]:
    store = ctxstore.connect_async(url, namespace=f"abench{run}", estimate_tokens=len)
    result: dict[str, dict[str, float]] = {}
    for kind in ("turn", "bare") if run % 2 else ("bare", "turn"):
        engine = ctxstore.AsyncContextEngine(store=store, chat_id=kind, user_id="u")
        engine.set(ctxstore.user("question"))
        chunks: list[Any] = []
        began = time.perf_counter()
        if kind == "bare":
            context = await engine.resolve()
            stream = aslowed(
                await litellm.acompletion(
                    model=MODEL,
                    messages=context.with_system(),
                    mock_response=answer,
                    stream=True,
                    stream_options={"include_usage": True},
                ),
                delay,
            )
        else:
            original = litellm.acompletion

            async def slowed_call(original: Any = original, **kw: Any) -> Any:
                return aslowed(await original(**kw), delay)

            litellm.acompletion = slowed_call  # type: ignore[assignment]
            try:
                stream = await engine.stream_turn(MODEL, mock_response=answer, title=False)
            finally:
                litellm.acompletion = original  # type: ignore[assignment]
        started = time.perf_counter()
        last = started
        async for chunk in stream:
            chunks.append(chunk)
            last = time.perf_counter()
        if kind == "bare":
            built = litellm.stream_chunk_builder(chunks)
            engine.set(ctxstore.message(built.choices[0].message))
            await engine.save()
            await engine.track_usage(built.usage)
        ended = time.perf_counter()
        result[kind] = {
            "start": started - began,
            "chunks": last - started,
            "end": ended - last,
            "count": len(chunks),
        }
    await store.close()
    return result["bare"], result["turn"]


def report(name: str, runs: list[tuple[dict[str, float], dict[str, float]]]) -> None:
    def median(side: int, key: str) -> float:
        return statistics.median(run[side][key] for run in runs)

    count = runs[0][1]["count"]
    print(f"\n{name}: {count:.0f} chunks, medians of {len(runs)} runs")
    print(f"{'phase':<8} {'bare ms':>10} {'turn ms':>10} {'turn - bare':>12}")
    for key in ("start", "chunks", "end"):
        bare, turn = median(0, key) * 1000, median(1, key) * 1000
        print(f"{key:<8} {bare:>10.2f} {turn:>10.2f} {turn - bare:>12.2f}")
    totals = [
        sum(run[side][k] for k in ("start", "chunks", "end")) for run in runs for side in (0, 1)
    ]
    bare_total = statistics.median(totals[0::2]) * 1000
    turn_total = statistics.median(totals[1::2]) * 1000
    print(f"{'total':<8} {bare_total:>10.2f} {turn_total:>10.2f} {turn_total - bare_total:>12.2f}")
    per_chunk = statistics.median((run[1]["chunks"] - run[0]["chunks"]) / count for run in runs)
    bare_chunk = median(0, "chunks") / count
    print(
        f"per chunk: bare {bare_chunk * 1e6:.1f} us, turn adds {per_chunk * 1e6:.1f} us "
        f"({per_chunk / bare_chunk:+.1%})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--chars", type=int, default=3000)
    parser.add_argument("--delay-ms", type=float, default=0.0)
    parser.add_argument("--replay", action="store_true", help="replay recorded chunks")
    options = parser.parse_args()
    answer = answer_of(options.chars)
    if options.replay:
        RECORDED.extend(
            litellm.completion(
                model=MODEL,
                messages=[{"role": "user", "content": "question"}],
                mock_response=answer,
                stream=True,
                stream_options={"include_usage": True},
            )
        )
    delay = options.delay_ms / 1000
    with local_redis() as server:
        sync = [sync_runs(server.url, answer, delay, run) for run in range(options.runs)]
        report("sync", sync[1:] or sync)  # the first run warms imports and scripts
        asynchronous = [
            asyncio.run(async_runs(server.url, answer, delay, run)) for run in range(options.runs)
        ]
        report("async", asynchronous[1:] or asynchronous)


if __name__ == "__main__":
    main()
