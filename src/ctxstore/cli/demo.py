"""``ctxstore demo``: a scripted conversation on the embedded store. No server, no API key.

``ctxstore --url local://./ctxdata demo`` runs it on a store that outlives the process instead
(a second command, ``ctxstore --url local://./ctxdata tree lisbon-trip``, reads it back); a
store that already holds the demo's chat gets it under the next free id (``lisbon-trip-2``...),
so the demo never writes into an existing chat.

It walks through what a chat backend does with the engine: save turns, rewind to retry an
answer, ask a "by the way" question on a side branch, checkpoint and restore, edit an earlier
message, and finally prints the chat's tree. The "model" is a scripted function, so the demo
runs offline in a second; ``README.md`` shows the same loop with ``litellm.completion``.
"""

from __future__ import annotations

from collections.abc import Callable

import ctxstore
from ctxstore import ContextEngine, assistant, hint, role, user
from ctxstore.cli.tree import visualize_graph
from ctxstore.errors import ChatNotFoundError

REPLIES = {
    "Plan a weekend in Lisbon.": "Day 1: Alfama and the castle. Day 2: Belem and pasteis.",
    "Where should we eat?": "Time Out Market for variety, Cervejaria Ramiro for seafood.",
    "Make it cheaper.": "Day 1: free viewpoints and tram 28. Day 2: LX Factory, a river picnic.",
    "Is it rainy in May?": "Rarely: May is mostly dry and around 22 C.",
    "Plan a weekend in Porto.": "Day 1: Ribeira and the bridge. Day 2: port cellars in Gaia.",
}


def scripted_model(messages: list[dict[str, object]]) -> str:
    """Answers the last user message from a script: the stand-in for an LLM call."""
    question = str(messages[-1]["content"])
    return REPLIES.get(question, "Noted.")


def turn(engine: ContextEngine, question: str, say: Callable[[str], None]) -> None:
    """One conversation turn: add the question, resolve, call the model, save the answer."""
    engine.set(user(question))
    context = engine.resolve()
    answer = scripted_model(context.messages)
    engine.set(assistant(answer))
    engine.save()
    say(f"  [{engine.branch}] user: {question}")
    say(f"  [{engine.branch}] assistant: {answer}")


def free_chat_id(store: ctxstore.AdminStore, base: str) -> str:
    """``base``, or ``base-2``, ``base-3``... the first id the store does not hold (an
    operator's question: any user's chat holds an id)."""
    candidate, number = base, 1
    while True:
        try:
            store.get_chat(candidate)
        except ChatNotFoundError:
            return candidate
        number += 1
        candidate = f"{base}-{number}"


def where_it_lives(url: str) -> str:
    """The URL, and for the embedded store what that means: the demo's reader should know
    whether the chat it just wrote will be there tomorrow."""
    if url.lower().startswith("memory:"):
        return f"{url} (in this process, gone when it exits)"
    return url


def run_demo(say: Callable[[str], None], url: str = "memory://") -> str:
    """Run the demo on the store at ``url``; returns the chat id it wrote."""
    with ctxstore.connect(url) as store:
        chat_id = free_chat_id(store.admin(), "lisbon-trip")
        alice = store.for_user("alice")  # the handle a request handler of alice's gets
        _walkthrough(alice, chat_id, say)
        say("")
        say(
            f"The chat as a tree (* marks the active branch), saved as {chat_id!r} in "
            f"{where_it_lives(url)}:"
        )
        say(visualize_graph(alice.get_graph(chat_id)))
    return chat_id


def _walkthrough(store: ctxstore.UserStore, chat_id: str, say: Callable[[str], None]) -> None:
    engine = ContextEngine(store=store, chat_id=chat_id)
    engine.set(role("You are a concise travel planner."), hint("Answer in one or two lines."))

    say("1. Save two turns on branch main:")
    turn(engine, "Plan a weekend in Lisbon.", say)
    first_answer = engine.head_message_id
    assert first_answer is not None
    checkpoint = engine.checkpoint("after-plan")
    say(f"   checkpoint {checkpoint.name!r} names the first answer")
    turn(engine, "Where should we eat?", say)

    say("2. By the way: a side question on a new branch; the engine stays on main:")
    side = engine.btw()
    side_engine = ContextEngine(store=store, chat_id=chat_id)
    side_engine.switch_branch(side.name)
    turn(side_engine, "Is it rainy in May?", say)

    say("3. Rewind to the first answer and take the conversation elsewhere:")
    rewound = engine.rewind(first_answer)
    say(f"   now on {rewound.name}, which starts at the first answer")
    turn(engine, "Make it cheaper.", say)

    say("4. Restore the checkpoint: another branch from the same answer:")
    restored = engine.restore("after-plan")
    say(f"   now on {restored.name}")
    turn(engine, "Where should we eat?", say)

    say("5. Edit the very first question; the original stays on its branch:")
    root = engine.resolve()
    first_question = store.load_branch(chat_id, engine.branch).messages[0]["id"]
    engine.set(user("Plan a weekend in Porto.", id=first_question))
    engine.save()
    say(
        f"   the edit landed on {engine.branch}; the old branch keeps {len(root.messages)} messages"
    )
    answer = scripted_model(engine.resolve().messages)
    engine.set(assistant(answer))
    engine.save()
    say(f"  [{engine.branch}] assistant: {answer}")
