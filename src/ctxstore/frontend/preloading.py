"""``ctxstore.preload()``: load up front what a first request would otherwise load.

A server's first request pays for what nothing loaded before: ctxstore's modules (the async
store, the engine, ``chat()``, the models), the tokenizer's tables of the model it counts with
(tiktoken's ``o200k_base``, a few hundred milliseconds), litellm (seconds) and the tokenizer
litellm counts a model's cost with on its first call. The async paths load each of these in a
worker thread when they first need it, so the event loop is never held for them; a server that
would rather pay before it takes traffic (a readiness probe that waits for it, a serverless
function's init phase, which is not billed the same) calls ``preload()`` at start.
"""

from __future__ import annotations

import importlib
import importlib.util

from ctxstore._base.litellm import warm_litellm
from ctxstore.messages.tokens import TokenCounter, message_counter

#: The modules a first request through a store, an engine and ``chat()`` imports.
MODULES = (
    "ctxstore.store.sync_store",
    "ctxstore.store.async_store",
    "ctxstore.store.scoped",
    "ctxstore.models",
    "ctxstore.engine",
    "ctxstore.frontend.streams",
    "ctxstore.ui",
)


def preload(
    model: str | None = None,
    *,
    estimate_tokens: TokenCounter | None = None,
    llm: bool = True,
) -> list[str]:
    """Load ctxstore's modules, the tokenizer of ``model`` (None: ``o200k_base``, what a store
    counts with unless told otherwise; with ``estimate_tokens``, none), and with ``llm`` (and
    litellm installed) litellm and the tokenizer it counts ``model``'s cost with. Returns what
    it loaded, in order. Synchronous and idempotent: call it once at start."""
    done: list[str] = []
    for name in MODULES:
        importlib.import_module(name)
        done.append(name)
    counter = message_counter(model, estimate_tokens)
    counter.open()  # tiktoken itself: a first call then starts no background thread for it
    done.append(f"tokenizer for {model or 'the default model'}")
    if llm and importlib.util.find_spec("litellm") is not None:
        warm_litellm(model)
        done.append("litellm")
    return done


__all__ = ["preload"]
