"""Turns: ``engine.turn(strategy, lease=, wait=)`` holds a chat for one turn across workers.

A turn takes the chat's lease (a fencing token bumped by each grant); every write of the turn
carries the token, and a write whose token another turn has made stale raises LeaseLostError
and writes nothing. Run on every backend through the sync and the async engine.
"""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Any

import pytest

import ctxstore
from tests.conftest import Clock
from tests.support.turns import in_turn


def contents(store: Any, branch: str | None = None) -> list[str]:
    return [m["message"]["content"] for m in store.load_branch("c1", branch).messages]


def ask(engine: Any, text: str) -> Any:
    engine.set(ctxstore.user(text))
    return engine.save()


def answer(engine: Any, text: str) -> Any:
    engine.set(ctxstore.assistant(text))
    return engine.save()


def test_a_turn_writes_and_gives_the_lease_back(make_engine: Any) -> None:
    first, second = make_engine(), make_engine()
    with in_turn(first) as turn:
        ask(first, "q1")
        answer(first, "a1")
    with in_turn(second) as next_turn:  # free again: granted at once with "reject"
        ask(second, "q2")
    assert next_turn.fence == turn.fence + 1
    assert contents(make_engine.store) == ["q1", "a1", "q2"]


def test_reject_raises_chat_busy_at_once_and_writes_nothing(make_engine: Any, snap: Any) -> None:
    holder, other = make_engine(), make_engine()
    other.resolve()  # opened before, so the refused turn's only call is the lease
    with in_turn(holder) as turn:
        ask(holder, "q1")
        before = snap()
        started = time.monotonic()
        with pytest.raises(ctxstore.ChatBusyError) as caught, in_turn(other, "reject"):
            pass
        assert time.monotonic() - started < 2.0
        assert isinstance(caught.value, ctxstore.ConflictError)
        assert caught.value.expires_at == turn.expires_at
        assert snap() == before
        answer(holder, "a1")  # the holder's turn goes on untouched
    assert contents(make_engine.store) == ["q1", "a1"]


def test_enqueue_gives_up_after_its_wait(make_engine: Any) -> None:
    holder, other = make_engine(), make_engine()
    with in_turn(holder, lease=60):
        started = time.monotonic()
        with (
            pytest.raises(ctxstore.ChatBusyError, match="after waiting"),
            in_turn(other, "enqueue", wait=0.3),
        ):
            pass
        assert time.monotonic() - started >= 0.3


def test_enqueue_takes_the_turn_when_the_holder_ends(make_engine: Any) -> None:
    holder, waiter = make_engine(), make_engine()
    waiter.resolve()
    entered, release = threading.Event(), threading.Event()
    order: list[str] = []

    def hold() -> None:
        with in_turn(holder):
            ask(holder, "q1")
            entered.set()
            release.wait(10)
            answer(holder, "a1")
            order.append("holder done")

    thread = threading.Thread(target=hold)
    thread.start()
    assert entered.wait(10)
    threading.Timer(0.2, release.set).start()
    with in_turn(waiter, "enqueue", wait=10):
        order.append("waiter in")
        ask(waiter, "q2")
        answer(waiter, "a2")
    thread.join(10)
    assert order == ["holder done", "waiter in"]
    assert contents(make_engine.store) == ["q1", "a1", "q2", "a2"]


def test_an_engine_kept_across_turns_takes_each_turn_from_the_chat_as_it_is(
    make_engine: Any,
) -> None:
    """A worker that keeps one engine per chat: another turn's messages between two of its
    turns are the conversation, so its next turn goes on the head, not onto a side branch."""
    first, second = make_engine(), make_engine()
    with in_turn(first):
        ask(first, "q1")
        answer(first, "a1")
    with in_turn(second):
        ask(second, "q2")
        answer(second, "a2")
    with in_turn(first):
        saved = ask(first, "q3")
        assert (saved.branch, saved.forked) == ("main", False)
        answer(first, "a3")
    assert contents(make_engine.store) == ["q1", "a1", "q2", "a2", "q3", "a3"]
    assert [b.name for b in make_engine.store.list_branches("c1")] == ["main"]


def test_an_answer_pending_before_the_turn_keeps_the_anchor_rule(make_engine: Any) -> None:
    """An answer made before the turn began was made from an older view of the chat: when
    another turn wrote since, it goes onto a side branch from its question."""
    first, second = make_engine(), make_engine()
    with in_turn(first):
        ask(first, "q1")
    with in_turn(second):
        ask(second, "q2")
    first.set(ctxstore.assistant("a1"))
    with in_turn(first):
        saved = first.save()
    assert saved.forked
    assert saved.branch != "main"
    assert contents(make_engine.store) == ["q1", "q2"]
    assert contents(make_engine.store, saved.branch) == ["q1", "a1"]


def test_interrupt_takes_over_and_the_old_turn_cannot_write(make_engine: Any, snap: Any) -> None:
    old, new = make_engine(), make_engine()
    store = make_engine.store
    with in_turn(old, lease=60) as old_turn:
        question = ask(old, "q1")
        with in_turn(new, "interrupt") as new_turn:
            assert new_turn.interrupted
            assert new_turn.fence == old_turn.fence + 1
            ask(new, "q2")
            answer(new, "a2")
        old.set(ctxstore.assistant("late answer"))
        before = snap()
        with pytest.raises(ctxstore.errors.LeaseLostError) as caught:
            old.save()
        assert isinstance(caught.value, ctxstore.ConflictError)
        assert snap() == before
        assert [f.data["content"] for f in old.pending] == ["late answer"]
    assert contents(store) == ["q1", "q2", "a2"]
    # Outside the turn, the kept answer goes onto a side branch from the old turn's question.
    saved = old.save()
    assert saved.forked
    assert saved.forked_at == question
    assert saved.branch != "main"
    assert old.branch == saved.branch
    assert contents(store, saved.branch) == ["q1", "late answer"]
    assert contents(store) == ["q1", "q2", "a2"]
    assert store.get_chat("c1").active_branch == "main"


def test_an_expired_lease_nobody_took_still_writes(make_engine: Any, clock: Clock) -> None:
    engine = make_engine()
    with in_turn(engine, lease=0.05):
        ask(engine, "q1")
        clock.now += 10_000  # well past the lease
        answer(engine, "a1")  # still the newest fence: accepted
    assert contents(make_engine.store) == ["q1", "a1"]


def test_an_expired_lease_taken_by_another_turn_is_lost(make_engine: Any, clock: Clock) -> None:
    slow, next_turn = make_engine(), make_engine()
    with in_turn(slow, lease=0.05):
        ask(slow, "q1")
        clock.now += 10_000
        with in_turn(next_turn, "reject") as taken:  # granted: the old lease expired
            assert not taken.interrupted
            ask(next_turn, "q2")
        with pytest.raises(ctxstore.errors.LeaseLostError):
            answer(slow, "a1")
    assert contents(make_engine.store) == ["q1", "q2"]


def test_every_write_of_a_lost_turn_is_refused(make_engine: Any, snap: Any) -> None:
    old, new = make_engine(), make_engine()
    with in_turn(old):
        head = ask(old, "q1")
        with in_turn(new, "interrupt"):
            pass
        before = snap()
        for write in (
            lambda: old.rewind(head),
            old.btw,
            lambda: old.checkpoint("cp"),
            lambda: old.switch_branch("main"),
            lambda: old.update_chat(title="t"),
            lambda: old.track_usage({"input_tokens": 3}),
        ):
            with pytest.raises(ctxstore.errors.LeaseLostError):
                write()
        assert snap() == before


def test_extend_runs_the_lease_on_and_fails_once_lost(make_engine: Any, clock: Clock) -> None:
    engine, other = make_engine(), make_engine()
    with in_turn(engine, lease=1) as turn:
        first = turn.expires_at  # about now + 1 s
        clock.now += 500
        extended = turn.extend(timedelta(seconds=2))  # about now + 2 s
        assert first + 1400 <= extended <= first + 1600
        assert turn.expires_at == extended
        with in_turn(other, "interrupt"):
            pass
        with pytest.raises(ctxstore.errors.LeaseLostError):
            turn.extend()


def test_writes_without_a_turn_are_not_fenced(make_engine: Any) -> None:
    """A lease fences the writes of turns only: compare-and-set still orders the rest."""
    holder, plain = make_engine(), make_engine()
    with in_turn(holder):
        ask(holder, "q1")
        ask(plain, "side note")
        answer(holder, "a1")  # another message came after q1: a side branch, never after it
    store = make_engine.store
    assert contents(store) == ["q1", "side note"]
    assert contents(store, holder.branch) == ["q1", "a1"]


def test_turn_arguments_are_checked(make_engine: Any) -> None:
    engine = make_engine()
    for kwargs in ({"lease": 0}, {"lease": -1}, {"wait": -1}, {"lease": "30"}, {"lease": 1e9}):
        with pytest.raises(ctxstore.ValidationError):
            engine.turn(**kwargs)
    with pytest.raises(ctxstore.ValidationError):
        engine.turn("queue")
    with in_turn(engine, lease=timedelta(seconds=5)) as turn:
        assert turn.expires_at > 0
        with pytest.raises(ctxstore.errors.ConfigurationError, match="nest"), in_turn(engine):
            pass


def test_another_users_chat_refuses_the_turn(make_engine: Any) -> None:
    ask(make_engine(), "q1")
    with pytest.raises(ctxstore.ChatNotFoundError), in_turn(make_engine(user_id="mallory")):
        pass


def test_the_interrupted_turn_ending_leaves_the_new_turns_lease(make_engine: Any) -> None:
    """The old turn's exit gives nothing back (the lease is the new turn's now): a third turn
    is still refused while the new one runs."""
    old, new, third = make_engine(), make_engine(), make_engine()
    with in_turn(old):
        ask(old, "q1")
        new_turn = in_turn(new, "interrupt")
        new_turn.__enter__()
    try:
        with pytest.raises(ctxstore.ChatBusyError), in_turn(third):
            pass
    finally:
        new_turn.__exit__(None, None, None)
    with in_turn(third):
        pass
