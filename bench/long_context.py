"""Long conversations: a token window of a long chain, the cost of counting tokens at save,
and what a compaction saves.

* ``resolve(max_tokens=8000)`` of an engine on an N-message chain, cold (the process cache
  emptied before each call; a window never uses it anyway), next to a cold full ``resolve()``
  of the same chain and a cold ``resolve()`` of a chat that holds only the messages of that
  window. The window should cost about what reading those messages alone costs (goal: at most
  1.5x), whatever N is.
* ``engine.save()`` of one message counting with ``o200k_base`` (the default) next to the same
  save with a counter that does no work (``estimate_tokens=lambda text: 0``). Goal: at most 1.1x.
* One compaction of a 200-message chat (a fixed 120-word summary): tokens of the context before
  and after, and how long the compaction took.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import ctxstore
from ctxstore.messages.tokens import message_counter
from ctxstore.window.compaction import CompactionPolicy, compaction, run_compaction

from floors import PING, Floors
from results import Timed, timed
from stores import NAMESPACE
from targets import Target
from timing import interleave
from workload import USER_ID, build_chat, messages

SCENARIO = "long_context"
COMPACTION = "compaction"
WINDOW_TOKENS = 8_000
WINDOW_ALONE = "resolve of the window's messages alone"
SUMMARY_TEXT = " ".join(["the user planned a trip and asked about trains and hotels"] * 12)


@dataclass(frozen=True)
class CompactionFigures:
    messages: int
    tokens_before: int
    tokens_after: int
    covered: int
    summary_tokens: int
    seconds: float


def _engine(store: Any, chat_id: str, **options: Any) -> ctxstore.ContextEngine:
    engine = ctxstore.ContextEngine(store=store, chat_id=chat_id, user_id=USER_ID, **options)
    engine.resolve(max_messages=1)  # opened: the timed calls do not include the open
    return engine


def window_rows(
    target: Target, store: Any, length: int, iterations: int, warmup: int
) -> list[Timed]:
    """The window read beside the full read and beside the window's messages alone."""
    chat = build_chat(store, f"window-{length}", length)
    window = _engine(store, chat.chat_id).resolve(max_tokens=WINDOW_TOKENS)
    kept = len(window.messages)
    alone = build_chat(store, f"window-alone-{length}", 0)
    start = length - kept
    store.append(alone.chat_id, "main", messages(kept, start), expected_head=None, user_id=USER_ID)
    windowed = _engine(store, chat.chat_id)
    full = _engine(store, chat.chat_id)
    only = _engine(store, alone.chat_id)
    floors = Floors(store.client, chat.chat_id)

    def forget() -> None:
        store.clear_cache()

    rows = []
    loop = interleave(
        lambda: windowed.resolve(max_tokens=WINDOW_TOKENS),
        {WINDOW_ALONE: only.resolve, PING: floors.ping},
        iterations,
        warmup,
        before_each=forget,
        settle=floors.ping,
    )
    extra = {"window_messages": float(kept), "window_tokens": float(WINDOW_TOKENS)}
    rows.append(
        timed(SCENARIO, "resolve(max_tokens=8000)", target.label, length, loop, WINDOW_ALONE, extra)
    )
    loop = interleave(
        full.resolve,
        {WINDOW_ALONE: only.resolve, PING: floors.ping},
        max(3, iterations // 10),
        1,
        before_each=forget,
        settle=floors.ping,
    )
    rows.append(
        timed(
            SCENARIO,
            "resolve() (cold, whole chain)",
            target.label,
            length,
            loop,
            WINDOW_ALONE,
            extra,
        )
    )
    floors.cleanup()
    return rows


def counting_rows(target: Target, store: Any, iterations: int, warmup: int) -> list[Timed]:
    """``engine.save()`` counting with o200k_base beside the same save with a free counter."""
    counted = _saving_engine(store, "count-o200k")
    free = _saving_engine(store, "count-free", estimate_tokens=lambda _text: 0)
    texts = iter(message["content"] for message in messages(10 * (iterations + warmup) + 10))
    floors = Floors(store.client, "count-o200k")

    def save(engine: ctxstore.ContextEngine) -> None:
        engine.set(ctxstore.user(next(texts)))
        engine.save()

    loop = interleave(
        lambda: save(counted),
        {"engine.save, no counting": lambda: save(free), PING: floors.ping},
        iterations,
        warmup,
        settle=floors.ping,
    )
    floors.cleanup()
    return [
        timed(
            SCENARIO,
            "engine.save (o200k_base count)",
            target.label,
            1,
            loop,
            "engine.save, no counting",
        )
    ]


def _saving_engine(store: Any, chat_id: str, **options: Any) -> ctxstore.ContextEngine:
    engine = ctxstore.ContextEngine(store=store, chat_id=chat_id, user_id=USER_ID, **options)
    engine.set(ctxstore.user("first"))
    engine.save()  # opened, the tokenizer loaded
    return engine


def compaction_figures(url: str, length: int = 200) -> CompactionFigures:
    """Tokens of a 200-message chat's context before and after one compaction."""
    store = ctxstore.connect(url, namespace=NAMESPACE)
    try:
        chat = build_chat(store, f"compact-{length}", length)
        before = store.branch_size(chat.chat_id, user_id=USER_ID).context_tokens
        counter = message_counter()
        started = time.perf_counter()
        result = run_compaction(
            store.run,
            compaction(store.state, chat.chat_id, None, CompactionPolicy(), counter),
            lambda _messages: SUMMARY_TEXT,
        )
        seconds = time.perf_counter() - started
        after = store.branch_size(chat.chat_id, user_id=USER_ID).context_tokens
        return CompactionFigures(
            messages=length,
            tokens_before=before,
            tokens_after=after,
            covered=result.covered,
            summary_tokens=result.tokens_after,
            seconds=seconds,
        )
    finally:
        store.close()


def long_context(
    target: Target, store: Any, length: int, iterations: int, warmup: int
) -> tuple[list[Timed], CompactionFigures]:
    rows = window_rows(target, store, length, iterations, warmup)
    rows += counting_rows(target, store, max(iterations * 5, 50), warmup)
    return rows, compaction_figures(target.url)
