"""The garbage-collector pause around long decodes: process-wide, so counted across threads,
never left off, never turning on a collector the application turned off, and switchable."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator

import pytest

import ctxstore
from ctxstore import Settings
from ctxstore._core.format.records import GC_PAUSE_FROM, gc_paused


@pytest.fixture(autouse=True)
def collector_on() -> Iterator[None]:
    gc.enable()
    yield
    gc.enable()


def test_a_long_decode_pauses_the_collector_and_a_short_one_does_not() -> None:
    with gc_paused(GC_PAUSE_FROM - 1):
        assert gc.isenabled()
    with gc_paused(GC_PAUSE_FROM):
        assert not gc.isenabled()
    assert gc.isenabled()


def test_switched_off_it_leaves_the_collector_alone() -> None:
    with gc_paused(10 * GC_PAUSE_FROM, pause=False):
        assert gc.isenabled()


def test_overlapping_decodes_in_threads_keep_it_off_until_the_last_ends() -> None:
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen: list[bool] = []

    def first() -> None:
        with gc_paused(GC_PAUSE_FROM):
            first_in.set()
            second_in.wait(5)
        first_out.set()

    def second() -> None:
        first_in.wait(5)
        with gc_paused(GC_PAUSE_FROM):
            second_in.set()
            first_out.wait(5)
            seen.append(gc.isenabled())  # the first ended: still off, this one decodes

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert seen == [False]
    assert gc.isenabled()


def test_a_collector_the_application_turned_off_stays_off() -> None:
    gc.disable()
    with gc_paused(GC_PAUSE_FROM):
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_an_error_inside_still_turns_it_back_on() -> None:
    with pytest.raises(KeyError), gc_paused(GC_PAUSE_FROM):
        raise KeyError("x")
    assert gc.isenabled()


@pytest.mark.parametrize("pause", [True, False])
def test_a_store_reads_a_long_chain_with_the_setting_it_was_given(
    pause: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[bool] = []
    real_disable = gc.disable

    def disable() -> None:
        seen.append(True)
        real_disable()

    monkeypatch.setattr(gc, "disable", disable)
    store = ctxstore.connect(
        "memory://", settings=Settings(pause_gc=pause), estimate_tokens=len
    ).admin()
    store.upsert_chat("c", "u")
    messages = [{"role": "user", "content": str(n)} for n in range(GC_PAUSE_FROM + 1)]
    store.append("c", "main", messages, expected_head=None)
    store.clear_cache()
    assert len(store.load_branch("c").messages) == GC_PAUSE_FROM + 1
    assert bool(seen) == pause
    assert gc.isenabled()
