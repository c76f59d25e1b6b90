"""UI messages in the store and the engine, on every backend through both shells: kept as given
under their own ids, checked before anything is written, counted by their parts (so they reach
the compaction threshold), and read back as model messages and as UI messages."""

from __future__ import annotations

import copy
from typing import Any

import pytest

import ctxstore
from ctxstore.messages import count_tokens
from ctxstore.models import CompactionTrigger
from ctxstore.ui import to_model_messages
from tests.support.streams import ModelStreams, consume
from tests.ui.corpus import CASES, STEP, assistant, text, tool, user

WORDS = " ".join(["word"] * 500)


def as_ui(stored: dict[str, Any]) -> dict[str, Any]:
    return {"id": stored["id"], **stored["message"]}


def test_a_ui_chat_is_kept_as_given_under_its_ids(store: Any) -> None:
    store.upsert_chat("c1", "alice")
    chat = copy.deepcopy(CASES["multi-turn"] + CASES["metadata and data parts"][1:])
    chat[-1]["id"] = "a9"
    store.append("c1", "main", copy.deepcopy(chat), expected_head=None)
    stored = store.load_branch("c1").messages
    assert [as_ui(message) for message in stored] == chat


def test_a_bad_ui_message_writes_nothing(store: Any, snap: Any) -> None:
    store.upsert_chat("c1", "alice")
    store.append("c1", "main", [user("u0")], expected_head=None)
    before = snap()
    bad = assistant("a1", STEP, tool("weather", "c1", "output-error"))
    del bad["parts"][1]["errorText"]
    with pytest.raises(ctxstore.errors.ValidationError, match=r"messages\[1\].*parts\[1\]"):
        store.append("c1", "main", [user("u1"), bad], expected_head="u0")
    assert snap() == before


def test_ui_messages_count_their_parts_and_reach_the_threshold(store: Any) -> None:
    """Ten 500-word UI messages: about 5,000 tokens, as in chat-completions form, so a 4,000
    token threshold enqueues a compaction job."""
    store.upsert_chat("c1", "alice")
    chat = [user(f"u{n}", text(WORDS)) for n in range(10)]
    trigger = CompactionTrigger(soft_tokens=4000)
    results, head = [], None
    for message in chat:
        results.append(
            store.append("c1", "main", [message], expected_head=head, compaction=trigger)
        )
        head = results[-1].head_message_id
    assert results[-1].context_tokens == count_tokens(to_model_messages(chat)) - 3  # no priming
    assert [r.compaction_job is not None for r in results].count(True) == 1


def test_the_engine_resolves_model_messages_and_ui_messages(make_engine: Any) -> None:
    engine = make_engine()
    chat = copy.deepcopy(CASES["one tool call, two steps"])
    engine.set(ctxstore.user(chat[0]), ctxstore.assistant(chat[1]))
    engine.save()
    resolved = make_engine().resolve()
    assert resolved.messages == to_model_messages(chat)
    assert resolved.ui_messages == chat


def test_a_chat_in_model_form_is_shown_as_ui_messages_with_its_ids(make_engine: Any) -> None:
    engine = make_engine()
    engine.set(ctxstore.user("weather?"))
    engine.set(
        ctxstore.assistant(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "weather", "arguments": "{}"},
                    }
                ],
            }
        ),
        ctxstore.message({"role": "tool", "tool_call_id": "c1", "content": "sunny"}),
        ctxstore.assistant("Sunny."),
    )
    head = engine.save()
    ids = list(head.message_ids)
    ui = make_engine().resolve().ui_messages
    assert [message["id"] for message in ui] == [ids[0], ids[1]]
    assert ui[1]["parts"] == [
        STEP,
        {
            "type": "tool-weather",
            "toolCallId": "c1",
            "state": "output-available",
            "input": {},
            "output": "sunny",
        },
        STEP,
        text("Sunny."),
    ]


def test_user_and_message_accept_a_ui_message_and_check_it() -> None:
    fragment = ctxstore.user(user("u7", text("hi")))
    assert fragment.id == "u7"
    assert fragment.data == {"role": "user", "parts": [text("hi")]}
    with pytest.raises(ctxstore.errors.ValidationError, match="assistant"):
        ctxstore.user(assistant("a1", STEP))
    with pytest.raises(ctxstore.errors.ValidationError, match="unknown part type"):
        ctxstore.message({"id": "x", "role": "user", "parts": [{"type": "bogus"}]})


def test_a_streamed_turn_of_a_ui_chat_saves_its_answer_as_a_ui_message(
    make_engine: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The engine writes in the chat's format: the question is a UI message, so the model gets
    chat-completions messages and the answer is stored as a UI message."""
    streams = ModelStreams().install(monkeypatch)
    engine = make_engine()
    assert engine.message_format == "model"
    engine.set(ctxstore.user(user("q1", text("Plan a weekend."))))
    assert engine.message_format == "ui"
    turn = engine.stream_turn(
        "gpt-4o-mini", mock_response="Go to Lisbon.", title_options={"mock_response": "Trip"}
    )
    assert consume(turn, engine) == "Go to Lisbon."
    assert streams.requests[0]["messages"][-1] == {"role": "user", "content": "Plan a weekend."}
    stored = make_engine.store.load_branch("c1").messages
    assert [as_ui(message) for message in stored] == [
        user("q1", text("Plan a weekend.")),
        assistant(stored[1]["id"], STEP, text("Go to Lisbon.")),
    ]


def test_an_explicit_message_format_wins_and_a_bad_one_is_refused(make_engine: Any) -> None:
    engine = make_engine(message_format="ui")
    engine.set(ctxstore.user("plain"))
    assert engine.message_format == "ui"
    with pytest.raises(ctxstore.errors.ConfigurationError, match="message_format"):
        make_engine(message_format="html")


def test_a_warm_resolve_does_not_scan_the_chain_and_finds_ui_messages_added_since(
    make_engine: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The chain keeps where its first UI message is, found once as it is read: a resolve that
    reads nothing new scans nothing, and a UI message another worker added is found in the
    part the read adds."""
    from ctxstore._core.ops import reads

    engine = make_engine()
    engine.set(ctxstore.user("plain"), ctxstore.assistant("model form"))
    engine.save()
    engine.resolve()
    scanned: list[int] = []
    original = reads.first_ui_message

    def counting(payloads: Any, start: int = 0) -> int:
        scanned.append(len(payloads) - start)
        return original(payloads, start)

    monkeypatch.setattr(reads, "first_ui_message", counting)
    assert engine.resolve().messages[-1] == {"role": "assistant", "content": "model form"}
    assert scanned in ([], [0])  # nothing new was read: nothing scanned
    other = make_engine()
    other.set(ctxstore.user(user("u9", text("from a UI"))))
    other.save()
    resolved = engine.resolve()
    assert resolved.messages[-1] == {"role": "user", "content": "from a UI"}
    assert sum(scanned) <= 1  # only the message the read added
