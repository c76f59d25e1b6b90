"""ContextEngine and AsyncContextEngine on every backend (sync and async through one suite)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

import ctxstore
from ctxstore import assistant, hint, message, role, user
from ctxstore.prompt import fragment, last_assistant_message
from tests.support.wire import trace_wire


def contents(messages: list[dict[str, Any]]) -> list[Any]:
    return [item["content"] for item in messages]


# --- construction and opening ----------------------------------------------------------------


@pytest.mark.parametrize(("chat_id", "user_id"), [("", "alice"), ("c1", ""), ("c{1}", "alice")])
def test_empty_or_bad_ids_are_refused(make_engine: Any, chat_id: str, user_id: str) -> None:
    with pytest.raises(ctxstore.ValidationError):
        make_engine(chat_id=chat_id, user_id=user_id)


def test_nothing_touches_redis_before_the_first_call(make_engine: Any, snap: Any) -> None:
    engine = make_engine(metadata={"source": "web"})
    engine.set(role("r"), user("hi"))
    assert engine.render() == "<role>r</role>"
    assert snap() == {}
    assert (engine.branch, engine.head_message_id, engine.chat) == ("main", None, None)
    assert engine.chat_id == "c1"


def test_first_call_upserts_merges_metadata_once_and_loads_the_active_branch(
    make_engine: Any,
) -> None:
    store = make_engine.store
    store.upsert_chat("c1", "alice", {"keep": 1})
    store.append("c1", "main", [ctxstore.NewMessage(user("q").data, id="q")], expected_head=None)
    store.create_branch("c1", "q", activate=True)
    engine = make_engine(metadata={"source": "web"})
    engine.resolve()
    assert engine.branch == "main-v2"
    assert engine.head_message_id == "q"
    assert engine.chat.metadata == {"keep": 1, "source": "web"}
    store.update_chat("c1", metadata={"source": "changed elsewhere"})
    engine.set(user("next"))
    engine.save()
    engine.resolve()
    assert store.get_chat("c1").metadata["source"] == "changed elsewhere"


def test_another_users_chat_is_refused_and_left_alone(make_engine: Any, snap: Any) -> None:
    make_engine.store.upsert_chat("c1", "bob")
    before = snap()
    engine = make_engine(user_id="alice", metadata={"x": 1})
    engine.set(user("let me in"))
    with pytest.raises(ctxstore.ChatNotFoundError):
        engine.resolve()
    with pytest.raises(ctxstore.ChatNotFoundError):
        engine.save()
    assert snap() == before
    assert engine.chat is None


# --- set, render, resolve --------------------------------------------------------------------


def test_set_returns_the_engine_and_sorts_fragments(make_engine: Any) -> None:
    engine = make_engine()
    assert engine.set(role("r")) is engine
    engine.set(hint("h"), user("u"), assistant("a"))
    assert [f.name for f in engine.context] == ["role", "hint"]
    assert [f.name for f in engine.pending] == ["user", "assistant"]
    with pytest.raises(ctxstore.ValidationError):
        engine.set("not a fragment")
    with pytest.raises(ctxstore.ValidationError, match="message dict"):
        engine.set(ctxstore.Fragment("user", "just text", kind="message"))


def test_set_copies_what_the_caller_hands_over(make_engine: Any) -> None:
    engine = make_engine()
    data = {"rules": ["one"]}
    payload = {"role": "user", "content": "original"}
    engine.set(fragment("policy", data), message(payload))
    data["rules"].append("two")
    payload["content"] = "changed"
    result = engine.resolve()
    assert "two" not in result.system_prompt
    assert contents(result.messages) == ["original"]


def test_resolve_returns_prompt_and_chain_then_pending(make_engine: Any) -> None:
    engine = make_engine()
    engine.set(role("You are terse."), user("Hi"), assistant("Hello"))
    engine.save()
    engine.set(user("Again"))
    result = engine.resolve()
    assert result.system_prompt == "<role>You are terse.</role>"
    assert result.messages == [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello"},
        {"role": "user", "content": "Again"},
    ]
    assert [f.name for f in engine.pending] == ["user"]
    assert result.with_system()[0] == {"role": "system", "content": result.system_prompt}
    assert engine.resolve(ctxstore.prompt.MarkdownRenderer()).system_prompt.startswith("## Role")


def test_resolve_sees_what_other_workers_saved(make_engine: Any) -> None:
    first, second = make_engine(), make_engine()
    first.set(user("from first"))
    first.save()
    second.set(user("from second"))
    second.save()
    assert contents(first.resolve().messages) == ["from first", "from second"]
    assert first.head_message_id == second.head_message_id


def test_resolved_messages_go_straight_to_litellm(make_engine: Any) -> None:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    engine = make_engine()
    engine.set(role("Be brief."), user("Say hi"))
    context = engine.resolve()
    reply = litellm.completion(
        model="gpt-4o-mini", messages=context.with_system(), mock_response="Hi there"
    )
    engine.set(message(reply.choices[0].message))
    head = engine.save()
    assert contents(engine.resolve().messages) == ["Say hi", "Hi there"]
    assert engine.head_message_id == head


def test_a_message_fragment_never_renders_into_the_prompt(make_engine: Any) -> None:
    engine = make_engine()
    engine.set(hint("h"), user("secret"))
    assert "secret" not in engine.render()
    assert "secret" not in engine.resolve().system_prompt


def test_lazy_data_is_materialized_once_and_cached(make_engine: Any) -> None:
    calls = {"sync": 0, "gen": 0}

    def sync_value() -> str:
        calls["sync"] += 1
        return "computed"

    def generator() -> Iterator[str]:
        calls["gen"] += 1
        yield "a"
        yield "b"

    engine = make_engine()
    engine.set(fragment("lazy", sync_value), fragment("items", generator()))
    first = engine.resolve().system_prompt
    second = engine.resolve().system_prompt
    assert first == second
    assert "computed" in first
    assert "<item>a</item>" in first
    assert calls == {"sync": 1, "gen": 1}


def test_async_lazy_data(make_engine: Any) -> None:
    async def fetch() -> str:
        return "fetched"

    async def stream() -> AsyncIterator[int]:
        for number in (1, 2):
            yield number

    engine = make_engine()
    engine.set(fragment("remote", fetch), fragment("numbers", stream()))
    prompt = engine.resolve().system_prompt
    assert "fetched" in prompt
    assert "<number>1</number>" in prompt


def test_render_does_no_io(make_engine: Any) -> None:
    engine = make_engine()
    engine.set(role("r"))
    with trace_wire() as wire:
        assert engine.render(ctxstore.prompt.TomlRenderer()) == 'role = "r"'
    assert wire.round_trips == 0


def test_resolve_and_save_are_one_round_trip(make_engine: Any, backend: str) -> None:
    make_engine.store.upsert_chat("c1", "alice")
    warm = make_engine()
    warm.set(user("warm up"))
    warm.save()
    warm.resolve()
    engine = make_engine()
    with trace_wire() as cold_resolve:
        engine.resolve()  # opens the chat and reads it in the same script
    engine.set(user("q"), assistant("a"))
    with trace_wire() as save:
        engine.save()
    with trace_wire() as resolve:
        engine.resolve()
    if not backend.startswith("redis+cluster"):
        assert (cold_resolve.round_trips, cold_resolve.script_calls) == (1, 1)
        assert (save.round_trips, save.script_calls) == (1, 1)
        assert (resolve.round_trips, resolve.script_calls) == (1, 1)


# --- save ------------------------------------------------------------------------------------


def test_save_persists_pending_and_returns_the_new_head(make_engine: Any) -> None:
    engine = make_engine()
    engine.set(user("q", id="u1"), assistant("a", id="a1"))
    assert engine.save() == "a1"
    assert engine.head_message_id == "a1"
    assert engine.pending == ()
    stored = make_engine.store.get_chain("c1", "a1")
    assert [item["id"] for item in stored] == ["u1", "a1"]


def test_save_with_nothing_pending_writes_nothing(make_engine: Any, snap: Any) -> None:
    engine = make_engine()
    engine.set(user("q"))
    head = engine.save()
    before = snap()
    assert engine.save() == head
    assert snap() == before


def test_saving_an_existing_id_forks_and_keeps_the_original(make_engine: Any) -> None:
    engine = make_engine()
    engine.set(user("q1", id="u1"), assistant("a1", id="a1"), user("q2", id="u2"))
    engine.save()
    engine.set(user("q2, edited", id="u2"))
    head = engine.save()
    assert engine.branch == "main-v2"
    assert head != "u2"
    assert contents(engine.resolve().messages) == ["q1", "a1", "q2, edited"]
    store = make_engine.store
    assert store.get_chat("c1").active_branch == "main-v2"
    assert contents([m["message"] for m in store.load_branch("c1", "main").messages]) == [
        "q1",
        "a1",
        "q2",
    ]
    assert store.get_message("c1", "u2")["message"]["content"] == "q2"


def test_editing_a_root_message_starts_a_new_root(make_engine: Any) -> None:
    engine = make_engine()
    engine.set(user("first", id="u1"), assistant("reply", id="a1"))
    engine.save()
    engine.set(user("first, edited", id="u1"))
    head = engine.save()
    chain = make_engine.store.get_chain("c1", head)
    assert [item["parent_id"] for item in chain] == [None]
    assert contents([item["message"] for item in chain]) == ["first, edited"]
    assert make_engine.store.get_message("c1", "u1")["message"]["content"] == "first"


def test_last_assistant_message_becomes_an_edit_of_the_last_answer(make_engine: Any) -> None:
    engine = make_engine()
    engine.set(user("q1"), assistant("wrong"), user("q2"))
    engine.save()
    fresh = make_engine()  # has never read the chain: save() must find the answer itself
    fresh.set(last_assistant_message("right"))
    fresh.save()
    assert fresh.branch == "main-v2"
    assert contents(fresh.resolve().messages) == ["q1", "right"]
    original = make_engine.store.load_branch("c1", "main").messages
    assert contents([m["message"] for m in original]) == ["q1", "wrong", "q2"]


def test_last_assistant_message_without_any_answer_is_appended(make_engine: Any) -> None:
    engine = make_engine()
    engine.set(user("q1"))
    engine.save()
    engine.set(last_assistant_message("first answer"))
    engine.save()
    assert engine.branch == "main"
    assert contents(engine.resolve().messages) == ["q1", "first answer"]


def test_concurrent_writer_default_rebases(make_engine: Any) -> None:
    first, second = make_engine(), make_engine()
    first.resolve()
    second.resolve()
    first.set(user("one"))
    first.save()
    second.set(user("two"))
    second.save()
    assert contents(second.resolve().messages) == ["one", "two"]
    assert second.branch == "main"


def test_concurrent_writer_with_raise_keeps_pending(make_engine: Any) -> None:
    first, second = make_engine(), make_engine(on_conflict="raise")
    first.resolve()
    second.resolve()
    first.set(user("one"))
    first.save()
    second.set(user("two"))
    with pytest.raises(ctxstore.HeadConflictError) as caught:
        second.save()
    assert caught.value.current_head == first.head_message_id
    assert [f.data["content"] for f in second.pending] == ["two"]
    second.resolve()
    second.save()
    assert contents(second.resolve().messages) == ["one", "two"]


def test_concurrent_writer_with_fork(make_engine: Any) -> None:
    first, second = make_engine(), make_engine(on_conflict="fork")
    first.resolve()
    second.resolve()
    first.set(user("one"))
    first.save()
    second.set(user("two"))
    second.save()
    assert second.branch == "main-v2"
    assert contents(second.resolve().messages) == ["two"]
    assert contents(first.resolve().messages) == ["one"]


def test_bad_on_conflict_is_refused(make_engine: Any) -> None:
    with pytest.raises(ctxstore.ValidationError):
        make_engine(on_conflict="merge")


# --- branches and checkpoints ------------------------------------------------------------------


def saved_chat(make_engine: Any) -> Any:
    engine = make_engine()
    engine.set(user("q1", id="u1"), assistant("a1", id="a1"), user("q2", id="u2"))
    engine.save()
    return engine


def test_rewind_branches_at_the_message_and_drops_pending(make_engine: Any) -> None:
    engine = saved_chat(make_engine)
    engine.set(user("pending"))
    info = engine.rewind("a1")
    assert (info.name, info.head_message_id, info.is_active) == ("main-v2", "a1", True)
    assert (engine.branch, engine.head_message_id, engine.pending) == ("main-v2", "a1", ())
    assert contents(engine.resolve().messages) == ["q1", "a1"]
    assert make_engine.store.get_chat("c1").active_branch == "main-v2"


def test_rewind_to_unknown_or_foreign_message_is_not_found(make_engine: Any) -> None:
    engine = saved_chat(make_engine)
    other = make_engine(chat_id="other")
    other.set(user("elsewhere", id="x1"))
    other.save()
    with pytest.raises(ctxstore.NotFoundError):
        engine.rewind("ghost")
    with pytest.raises(ctxstore.NotFoundError):
        engine.rewind("x1")
    assert engine.branch == "main"


def test_btw_branches_without_moving_the_engine(make_engine: Any) -> None:
    engine = saved_chat(make_engine)
    engine.set(user("still pending"))
    info = engine.btw()
    assert (info.name, info.head_message_id, info.is_active) == ("main-v2", "u2", False)
    assert engine.branch == "main"
    assert [f.data["content"] for f in engine.pending] == ["still pending"]
    assert make_engine.store.get_chat("c1").active_branch == "main"


def test_btw_and_checkpoint_need_a_message(make_engine: Any) -> None:
    engine = make_engine()
    with pytest.raises(ctxstore.errors.EmptyBranchError):
        engine.btw()
    with pytest.raises(ctxstore.errors.EmptyBranchError):
        engine.checkpoint("cp")


def test_switch_branch(make_engine: Any) -> None:
    engine = saved_chat(make_engine)
    engine.rewind("u1")
    engine.set(user("pending"))
    info = engine.switch_branch("main")
    assert (info.name, info.is_active) == ("main", True)
    assert (engine.branch, engine.head_message_id, engine.pending) == ("main", "u2", ())
    active = [b.name for b in make_engine.store.list_branches("c1") if b.is_active]
    assert active == ["main"]
    with pytest.raises(ctxstore.errors.BranchNotFoundError):
        engine.switch_branch("ghost")


def test_checkpoint_and_restore(make_engine: Any) -> None:
    engine = saved_chat(make_engine)
    first = engine.checkpoint("before")
    assert (first.name, first.message_id) == ("before", "u2")
    engine.set(assistant("a2"))
    engine.save()
    moved = engine.checkpoint("before")
    assert moved.message_id == engine.head_message_id
    engine.checkpoint("early")
    engine.set(user("more"))
    engine.save()
    info = engine.restore("early")
    assert info.head_message_id == moved.message_id
    assert engine.branch == info.name == "main-v2"
    assert contents(engine.resolve().messages) == ["q1", "a1", "q2", "a2"]
    with pytest.raises(ctxstore.errors.CheckpointNotFoundError):
        engine.restore("ghost")


def test_branch_names_count_the_current_branch_family(make_engine: Any) -> None:
    engine = saved_chat(make_engine)
    assert engine.rewind("u1").name == "main-v2"
    assert engine.rewind("u1").name == "main-v2-v2"
    engine.switch_branch("main")
    assert engine.rewind("a1").name == "main-v4"


# --- chat fields -----------------------------------------------------------------------------


def test_update_chat(make_engine: Any) -> None:
    engine = make_engine(metadata={"a": 1})
    meta = engine.update_chat(title="Trip", metadata={"b": 2})
    assert meta.title == "Trip"
    assert meta.metadata == {"a": 1, "b": 2}
    kept = engine.update_chat(metadata={"a": 3})
    assert (kept.title, kept.metadata) == ("Trip", {"a": 3, "b": 2})
    assert engine.chat == kept


def test_track_usage_takes_dicts_and_usage_objects(make_engine: Any) -> None:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    engine = make_engine()
    engine.track_usage({"input_tokens": 3, "output_tokens": 2})
    response = litellm.completion(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "x"}], mock_response="y"
    )
    usage = response.usage
    totals = engine.track_usage(usage)
    assert totals["input_tokens"] == 3 + usage.prompt_tokens
    assert totals["output_tokens"] == 2 + usage.completion_tokens
    assert engine.chat.metadata["usage"] == totals
    assert make_engine.store.get_chat("c1").metadata["usage"] == totals


def test_concurrent_track_usage_calls_all_count(make_engine: Any) -> None:
    from concurrent.futures import ThreadPoolExecutor

    engines = [make_engine() for _ in range(5)]
    for engine in engines:
        engine.resolve()

    def track(engine: Any) -> None:
        for _ in range(20):
            engine.track_usage({"prompt_tokens": 1, "completion_tokens": 2})

    with ThreadPoolExecutor(max_workers=5) as pool:
        list(pool.map(track, engines))
    assert make_engine.store.get_chat("c1").metadata["usage"] == {
        "input_tokens": 100,
        "output_tokens": 200,
        "total_tokens": 300,
    }


def test_branch_operations_are_one_round_trip_each(make_engine: Any, backend: str) -> None:
    engine = saved_chat(make_engine)
    engine.checkpoint("warm")
    engine.restore("warm")  # every script used below is now loaded on the server
    engine.btw()
    engine.switch_branch("main")
    engine.rewind("u1")
    engine.switch_branch("main")
    calls = {
        "rewind": lambda: engine.rewind("a1"),
        "switch_branch": lambda: engine.switch_branch("main"),
        "btw": engine.btw,
        "checkpoint": lambda: engine.checkpoint("cp"),
        "restore": lambda: engine.restore("cp"),
    }
    for name, call in calls.items():
        with trace_wire() as wire:
            call()
        if not backend.startswith("redis+cluster"):
            assert (name, wire.round_trips, wire.script_calls) == (name, 1, 1)
