"""How long a ``chat()`` answer's first chunk waits after the model's first token: a model
that streams with delays (litellm's entry point replaced by a scripted stream), the time from
the model handing out its first text chunk to the ``ChatStream`` handing out the first
``text-delta``, on the embedded store and on a private redis-server, through both shells.

``python bench/chat_latency.py [--answers N] [--delay SECONDS]``: prints the median, p90 and
max of that gap per store and shell, and the same gap for iterating the model's stream alone
(the floor: what any consumer of the stream pays).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

from local_redis import local_redis

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import litellm

import ctxstore

WORDS = [
    *("Lisbon", "in", "spring:", "trams,", "tiles,", "custard", "tarts"),
    *("and", "the", "river", "at", "dusk."),
]


class TimedModel:
    """Streams an answer with ``delay`` seconds before each chunk; notes when it hands out its
    first text chunk."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.first_token = 0.0

    def _chunks(self) -> list[dict[str, Any]]:
        deltas = [{"choices": [{"index": 0, "delta": {"content": w + " "}}]} for w in WORDS]
        usage = {"prompt_tokens": 10, "completion_tokens": len(WORDS), "total_tokens": 30}
        return [*deltas, {"choices": [], "usage": usage}]

    def completion(self, **_request: Any) -> Iterator[dict[str, Any]]:
        def stream() -> Iterator[dict[str, Any]]:
            for index, chunk in enumerate(self._chunks()):
                time.sleep(self.delay)
                if index == 0:
                    self.first_token = time.perf_counter()
                yield chunk

        return stream()

    async def acompletion(self, **_request: Any) -> AsyncIterator[dict[str, Any]]:
        async def stream() -> AsyncIterator[dict[str, Any]]:
            for index, chunk in enumerate(self._chunks()):
                await asyncio.sleep(self.delay)
                if index == 0:
                    self.first_token = time.perf_counter()
                yield chunk

        return stream()


def first_delta(chunks: Iterator[dict[str, Any]]) -> float:
    for chunk in chunks:
        if chunk["type"] == "text-delta":
            return time.perf_counter()
    raise AssertionError("no text came")


def sync_gaps(url: str, model: TimedModel, answers: int) -> list[float]:
    store = ctxstore.connect(url, namespace="bench-chat")
    gaps = []
    for index in range(answers):
        engine = ctxstore.ContextEngine(store=store, chat_id=f"c{index}", user_id="u")
        message = {"id": f"m{index}", "role": "user", "parts": [{"type": "text", "text": "Hi"}]}
        stream = ctxstore.chat(engine, [message], model="gpt-4o-mini")
        iterator = iter(stream)
        seen = first_delta(iterator)
        gaps.append(seen - model.first_token)
        for _ in iterator:
            pass
    store.close()
    return gaps


def async_gaps(url: str, model: TimedModel, answers: int) -> list[float]:
    async def run() -> list[float]:
        store = ctxstore.connect_async(url, namespace="bench-chat-async")
        gaps = []
        for index in range(answers):
            engine = ctxstore.AsyncContextEngine(store=store, chat_id=f"c{index}", user_id="u")
            message = {"id": f"m{index}", "role": "user", "parts": [{"type": "text", "text": "Hi"}]}
            stream = await ctxstore.achat(engine, [message], model="gpt-4o-mini")
            seen = 0.0
            async for chunk in stream:
                if chunk["type"] == "text-delta" and not seen:
                    seen = time.perf_counter()
            gaps.append(seen - model.first_token)
        await store.close()
        return gaps

    return asyncio.run(run())


def floor_gaps(model: TimedModel, answers: int) -> list[float]:
    gaps = []
    for _ in range(answers):
        for chunk in model.completion():
            if chunk["choices"]:
                gaps.append(time.perf_counter() - model.first_token)
                break
    return gaps


def summary(label: str, gaps: list[float]) -> None:
    ordered = sorted(gap * 1000 for gap in gaps)
    p90 = ordered[max(0, int(len(ordered) * 0.9) - 1)]
    print(
        f"{label:<34} median {statistics.median(ordered):6.3f} ms  p90 {p90:6.3f} ms  "
        f"max {ordered[-1]:6.3f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--answers", type=int, default=40)
    parser.add_argument("--delay", type=float, default=0.01)
    args = parser.parse_args()
    model = TimedModel(args.delay)
    litellm.completion = model.completion  # type: ignore[assignment]
    litellm.acompletion = model.acompletion  # type: ignore[assignment]
    summary("model stream alone (floor)", floor_gaps(model, args.answers))
    with local_redis() as server:
        for name, url in (("memory://", "memory://bench"), ("redis-server", server.url)):
            summary(f"chat() on {name}", sync_gaps(url, model, args.answers))
            summary(f"achat() on {name}", async_gaps(url, model, args.answers))


if __name__ == "__main__":
    main()
