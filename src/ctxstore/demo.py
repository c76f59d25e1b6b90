"""A scripted walkthrough of the store on the embedded backend: no server, no API key."""

from __future__ import annotations

from collections.abc import Callable

import ctxstore


def run_demo(say: Callable[[str], None]) -> None:
    store = ctxstore.connect("memory://")
    store.upsert_chat("trip", "alice", {"topic": "travel"})
    first = store.append(
        "trip",
        "main",
        [
            {"role": "user", "content": "Plan a weekend in Lisbon."},
            {"role": "assistant", "content": "Day 1: Alfama and the castle. Day 2: Belem."},
        ],
        expected_head=None,
    )
    say(f"appended 2 messages to main, head {first.head_message_id[:8]}")
    branch = store.create_branch("trip", first.message_ids[0], activate=True)
    retry = store.append(
        "trip",
        branch.name,
        [{"role": "assistant", "content": "Day 1: LX Factory. Day 2: Sintra."}],
        expected_head=branch.head_message_id,
    )
    say(f"retried the answer on {branch.name}, head {retry.head_message_id[:8]}")
    store.upsert_checkpoint("trip", "plan-b", retry.head_message_id)
    for info in store.list_branches("trip"):
        marker = "*" if info.is_active else " "
        say(f"{marker} {info.name}: {info.message_count} messages")
    for message in store.load_branch("trip").messages:
        say(f"  {message['message']['role']}: {message['message']['content']}")
