"""The compaction trigger of a save: one job per chat when the context reaches the threshold,
settled by a summary, re-enqueued only when stale; on every backend (the Cluster adds the job
after the reply)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import ctxstore
from ctxstore.models import CompactionTrigger
from tests.support.keyspace import raw_client


def letters(text: str) -> int:
    return len(text)


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


PER_MESSAGE = 3 + 4 + 10  # overhead, "user", ten characters


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000_000

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def jstore(backend: str, namespace: str) -> Iterator[tuple[Any, Clock]]:
    clock = Clock()
    store = ctxstore.connect(
        backend, namespace=namespace, estimate_tokens=letters, clock=clock
    ).admin()
    store.upsert_chat("j", "alice")
    yield store, clock
    store.close()


def jobs(store: Any, backend: str) -> list[dict[str, str]]:
    client = raw_client(backend)
    found = []
    for stream in store.state.keyspace.job_streams():
        for _id, fields in client.xrange(stream):
            found.append({k.decode(): v.decode() for k, v in fields.items()})
    client.close()
    return found


def save(store: Any, head: str | None, trigger: CompactionTrigger) -> Any:
    return store.append("j", "main", [user("x" * 10)], expected_head=head, compaction=trigger)


def test_one_job_when_the_context_reaches_the_threshold(
    jstore: tuple[Any, Clock], backend: str
) -> None:
    store, _clock = jstore
    trigger = CompactionTrigger(soft_tokens=5 * PER_MESSAGE)
    head = None
    results = []
    for _ in range(8):
        result = save(store, head, trigger)
        head = result.head_message_id
        results.append(result)
    assert [r.context_tokens for r in results] == [PER_MESSAGE * n for n in range(1, 9)]
    assert [r.compaction_job is not None for r in results] == [False] * 4 + [True] + [False] * 3
    assert jobs(store, backend) == [
        {
            "chat": "j",
            "branch": "main",
            "job": results[4].compaction_job,
            "soft": str(5 * PER_MESSAGE),
            "keep": "4",
        }
    ]
    assert store.state.keyspace.job_stream("j") in store.state.keyspace.job_streams()


def test_a_summary_settles_the_job_and_a_later_crossing_enqueues_again(
    jstore: tuple[Any, Clock], backend: str
) -> None:
    store, _clock = jstore
    trigger = CompactionTrigger(soft_tokens=3 * PER_MESSAGE)
    heads = []
    head = None
    for _ in range(4):
        result = save(store, head, trigger)
        head = result.head_message_id
        heads.append(head)
    job = jobs(store, backend)[0]["job"]
    settled = store.write_summary("j", heads[2], "three", tokens=5, job=job)
    assert settled["written"]
    result = save(store, head, trigger)  # context: 5 + 2 messages: below the threshold
    assert result.context_tokens == 5 + 2 * PER_MESSAGE
    assert result.compaction_job is None
    result = save(store, result.head_message_id, trigger)
    assert result.context_tokens == 5 + 3 * PER_MESSAGE
    assert result.compaction_job is not None
    assert len(jobs(store, backend)) == 2


def test_a_stale_job_is_enqueued_again(jstore: tuple[Any, Clock], backend: str) -> None:
    store, clock = jstore
    trigger = CompactionTrigger(soft_tokens=PER_MESSAGE, job_ttl_ms=60_000)
    head = save(store, None, trigger).head_message_id
    head = save(store, head, trigger).head_message_id
    assert len(jobs(store, backend)) == 1
    clock.now += 61_000
    assert save(store, head, trigger).compaction_job is not None
    assert len(jobs(store, backend)) == 2


def test_no_trigger_no_job(jstore: tuple[Any, Clock], backend: str) -> None:
    store, _clock = jstore
    result = store.append("j", "main", [user("x" * 1000)], expected_head=None)
    assert result.context_tokens == -1
    assert result.compaction_job is None
    assert jobs(store, backend) == []


@pytest.mark.parametrize("bad", [-1, 1.5, True])
def test_bad_triggers_are_refused(bad: Any) -> None:
    with pytest.raises(ctxstore.errors.ConfigurationError):
        CompactionTrigger(soft_tokens=bad)
    with pytest.raises(ctxstore.errors.ConfigurationError):
        CompactionTrigger(soft_tokens=1, job_ttl_ms=bad)


def chosen(message_id: str) -> dict[str, str]:
    return {"id": message_id, "role": "user", "content": "x" * 10}


def test_messages_under_chosen_ids_trigger_as_generated_ones_do(
    jstore: tuple[Any, Clock], backend: str
) -> None:
    """A chat UI sends its own id with every message: those saves cross the threshold too."""
    store, _clock = jstore
    trigger = CompactionTrigger(soft_tokens=5 * PER_MESSAGE)
    head = None
    results = []
    for n in range(8):
        result = store.append(
            "j", "main", [chosen(f"m{n}")], expected_head=head, compaction=trigger
        )
        head = result.head_message_id
        results.append(result)
    assert head == "m7"
    assert [r.context_tokens for r in results] == [PER_MESSAGE * n for n in range(1, 9)]
    assert [r.compaction_job is not None for r in results] == [False] * 4 + [True] + [False] * 3
    assert [job["branch"] for job in jobs(store, backend)] == ["main"]


def test_an_edit_that_forks_triggers_on_the_branch_it_lands_on(
    jstore: tuple[Any, Clock], backend: str
) -> None:
    """An edit of m1 forks at m0: the new branch holds m0 and the edited messages, and the job
    names that branch and counts that chain (not the old branch's longer one)."""
    store, _clock = jstore
    trigger = CompactionTrigger(soft_tokens=4 * PER_MESSAGE)
    head = None
    for n in range(3):
        head = store.append("j", "main", [chosen(f"m{n}")], expected_head=head).head_message_id
    edit = store.append(
        "j",
        "main",
        [chosen("m1"), chosen("e2"), chosen("e3")],
        expected_head=head,
        on_existing="fork",
        compaction=trigger,
    )
    assert edit.branch != "main"
    assert edit.context_tokens == 4 * PER_MESSAGE  # m0 + the three new messages
    assert edit.compaction_job is not None
    assert [(job["branch"], job["soft"]) for job in jobs(store, backend)] == [
        (edit.branch, str(4 * PER_MESSAGE))
    ]


def test_an_edit_counts_from_the_newest_summary_on_its_own_chain(
    jstore: tuple[Any, Clock], backend: str
) -> None:
    store, _clock = jstore
    trigger = CompactionTrigger(soft_tokens=3 * PER_MESSAGE)
    head = None
    heads = []
    for n in range(4):
        head = store.append("j", "main", [chosen(f"m{n}")], expected_head=head).head_message_id
        heads.append(head)
    assert store.write_summary("j", heads[1], "two", tokens=5)["written"]
    edit = store.append(
        "j", "main", [chosen("m3")], expected_head=head, on_existing="fork", compaction=trigger
    )
    # the chain: m0 m1 (summarized: 5 tokens) m2 and the edited m3
    assert edit.context_tokens == 5 + 2 * PER_MESSAGE
    assert edit.compaction_job is None
    again = store.append(
        "j", edit.branch, [chosen("n4")], expected_head=edit.head_message_id, compaction=trigger
    )
    assert again.context_tokens == 5 + 3 * PER_MESSAGE
    assert again.compaction_job is not None
