"""A worker process for the turn tests: ``python -m tests.support.turn_worker MODE URL NS CHAT``.

``turns``: runs ``TURNS`` turns with ``"enqueue"`` (question, a short model call, answer).
``paused``: takes a turn with a short lease, saves a question, prints ``ready`` and stalls (the
test SIGSTOPs it meanwhile); then tries to save the answer, prints ``lost`` when the turn's lease
was taken, and saves the answer after the turn, printing where it went as JSON.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time

import ctxstore

TURNS = 5


def run_turns(engine: ctxstore.ContextEngine) -> None:
    name = f"w{os.getpid()}"
    for index in range(TURNS):
        with engine.turn("enqueue", lease=30, wait=60):
            engine.set(ctxstore.user(f"q:{name}:{index}"))
            engine.save()
            engine.resolve()
            time.sleep(random.uniform(0.0, 0.03))
            engine.set(ctxstore.assistant(f"a:{name}:{index}"))
            engine.save()


def run_paused(engine: ctxstore.ContextEngine) -> None:
    with engine.turn("reject", lease=0.5):
        engine.set(ctxstore.user("paused-q"))
        engine.save()
        print("ready", flush=True)
        time.sleep(1.0)  # the model call, during which the process is stopped
        engine.set(ctxstore.assistant("paused-a"))
        try:
            engine.save()
            print("saved", flush=True)
        except ctxstore.errors.LeaseLostError:
            print("lost", flush=True)
    saved = engine.save()
    print(
        json.dumps(
            {"branch": saved.branch if saved else None, "forked": bool(saved and saved.forked)}
        ),
        flush=True,
    )


def main() -> None:
    mode, url, namespace, chat = sys.argv[1:5]
    store = ctxstore.connect(url, namespace=namespace).admin()
    engine = ctxstore.ContextEngine(store=store, chat_id=chat, user_id="alice")
    run_turns(engine) if mode == "turns" else run_paused(engine)
    store.close()


if __name__ == "__main__":
    main()
