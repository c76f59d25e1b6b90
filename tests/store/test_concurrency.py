"""Concurrency: many OS processes writing one chat at the same time, on real servers.

Every operation of the store is one Lua script, and these tests check what that promises when
separate processes (like the app servers of a deployment) race on one chat: the head
compare-and-set of ``append`` never loses or duplicates a message, conflicts are reported rather
than silently resolved, auto-named forks never collide, counters and metadata merges never lose
an update, and a chat is deleted exactly once.

Workers are started with the "spawn" method (a fresh interpreter each, nothing inherited but
their arguments), connect on their own from the URL and namespace, make one warm-up call (so
connecting, the server checks and script loading are behind them) and then wait at a barrier, so
the measured part really overlaps. Each worker sends back what the store acknowledged to it; the
test then compares that with what the store holds.
"""

from __future__ import annotations

import itertools
import multiprocessing
import queue
import re
import time
import traceback
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import ctxstore
from tests.support.keyspace import snapshot

SPAWN = multiprocessing.get_context("spawn")

#: Seconds a whole group of workers may take, from start to the last result.
DEADLINE = 150.0
#: Seconds a worker waits at the start barrier for the others.
BARRIER_TIMEOUT = 60.0

WORKERS = 8
APPENDS_PER_WORKER = 500
FORKS_PER_WORKER = 25
USAGE_WORKERS = 5
USAGE_CALLS_PER_WORKER = 20
METADATA_KEYS_PER_WORKER = 10
DELETED_CHATS = 20

CHAT = "race"
OWNER = "alice"


# --- running workers ---------------------------------------------------------------------------


def _worker_entry(
    target: Callable[..., Any],
    index: int,
    barrier: Any,
    results: Any,
    args: tuple[Any, ...],
) -> None:
    """Runs one worker and reports its return value or its traceback through ``results``.

    A failing worker breaks the barrier, so the others stop waiting instead of timing out.
    """
    try:
        value = target(index, barrier, *args)
    except BaseException:
        barrier.abort()
        results.put((index, False, traceback.format_exc()))
        return
    results.put((index, True, value))


def run_workers(target: Callable[..., Any], count: int, *args: Any) -> list[Any]:
    """Start ``count`` spawned processes running ``target(index, barrier, *args)``.

    Returns their return values in worker order; fails the test with the workers' tracebacks
    if any of them raised, or if they did not finish within :data:`DEADLINE`.
    """
    barrier = SPAWN.Barrier(count)
    results = SPAWN.Queue()
    processes = [
        SPAWN.Process(
            target=_worker_entry,
            args=(target, index, barrier, results, args),
            name=f"{target.__name__}-{index}",
        )
        for index in range(count)
    ]
    for process in processes:
        process.start()
    values: dict[int, Any] = {}
    failures: list[str] = []
    try:
        deadline = time.monotonic() + DEADLINE
        while len(values) + len(failures) < count:
            try:
                index, ok, value = results.get(timeout=1.0)
            except queue.Empty:
                # A worker that died without reporting (killed, crashed interpreter) leaves the
                # others done and nothing to wait for; results already sent are still read.
                if any(p.is_alive() for p in processes) and time.monotonic() < deadline:
                    continue
                try:
                    index, ok, value = results.get(timeout=5.0)
                except queue.Empty:
                    exits = [process.exitcode for process in processes]
                    pytest.fail(
                        f"workers sent {len(values) + len(failures)} of {count} results "
                        f"(exit codes {exits})"
                    )
            if ok:
                values[index] = value
            else:
                failures.append(f"worker {index}:\n{value}")
        for process in processes:
            process.join(timeout=30)
    finally:
        for process in processes:
            if process.is_alive():
                process.terminate()
                process.join(timeout=10)
        results.close()
    if failures:
        pytest.fail("workers failed:\n" + "\n".join(failures))
    assert [process.exitcode for process in processes] == [0] * count
    return [values[index] for index in range(count)]


def _ready(url: str, namespace: str, chat_id: str, barrier: Any) -> ctxstore.Store:
    """A connected, warmed-up store, returned once every worker of the group is ready."""
    store = ctxstore.connect(url, namespace=namespace).admin()
    store.get_chat(chat_id)
    barrier.wait(timeout=BARRIER_TIMEOUT)
    return store


def text(label: str) -> dict[str, Any]:
    return {"role": "user", "content": label}


# --- workers (top-level functions: spawned processes import them by name) ----------------------


def append_rebase_worker(
    index: int, barrier: Any, url: str, namespace: str, count: int
) -> list[tuple[str, str, str | None, bool]]:
    """Appends ``count`` messages with on_conflict="rebase", each from the head it last saw.

    Returns (message id, content, expected head sent, rebased) per append, in order.
    """
    store = _ready(url, namespace, CHAT, barrier)
    acknowledged = []
    head: str | None = None
    with store:
        for i in range(count):
            content = f"w{index}-{i}"
            result = store.append(
                CHAT, "main", [text(content)], expected_head=head, on_conflict="rebase"
            )
            if result.branch != "main" or result.conflict_fork is not None:
                raise AssertionError(f"a rebase append landed elsewhere: {result!r}")
            if result.head_message_id != result.message_ids[-1]:
                raise AssertionError(f"the reported head is not the new message: {result!r}")
            [message_id] = result.message_ids
            acknowledged.append((message_id, content, head, result.rebased))
            head = result.head_message_id
    return acknowledged


def append_raise_worker(
    index: int, barrier: Any, url: str, namespace: str, count: int
) -> dict[str, Any]:
    """Attempts ``count`` appends with on_conflict="raise", continuing from each reported head.

    Returns the acknowledged appends (id, content, expected head sent, rebased, branch), the
    refused ones (content, expected head sent, the error's branch, expected and current head)
    and the number of attempts.
    """
    store = _ready(url, namespace, CHAT, barrier)
    acknowledged = []
    conflicts = []
    head: str | None = None
    with store:
        for i in range(count):
            content = f"w{index}-{i}"
            try:
                result = store.append(
                    CHAT, "main", [text(content)], expected_head=head, on_conflict="raise"
                )
            except ctxstore.HeadConflictError as error:
                conflicts.append(
                    (content, head, error.branch, error.expected_head, error.current_head)
                )
                head = error.current_head
                continue
            [message_id] = result.message_ids
            acknowledged.append((message_id, content, head, result.rebased, result.branch))
            head = result.head_message_id
    return {"acknowledged": acknowledged, "conflicts": conflicts, "attempts": count}


def fork_worker(
    index: int, barrier: Any, url: str, namespace: str, at_message: str, count: int
) -> list[tuple[str, str | None, bool, int]]:
    """Creates ``count`` auto-named branches at ``at_message``; returns what each call reported."""
    store = _ready(url, namespace, CHAT, barrier)
    created = []
    with store:
        for _ in range(count):
            info = store.create_branch(CHAT, at_message, base="main", activate=False)
            created.append((info.name, info.head_message_id, info.is_active, info.message_count))
    return created


def usage_increment(index: int, i: int) -> int:
    """The input tokens call ``i`` of worker ``index`` adds: 1..N, distinct over all calls."""
    return 1 + index * USAGE_CALLS_PER_WORKER + i


def usage_worker(
    index: int, barrier: Any, url: str, namespace: str, count: int
) -> list[dict[str, int]]:
    """Adds usage ``count`` times; returns the totals each call reported."""
    store = _ready(url, namespace, CHAT, barrier)
    with store:
        return [
            store.add_usage(CHAT, {"input_tokens": usage_increment(index, i), "output_tokens": 3})
            for i in range(count)
        ]


def metadata_worker(
    index: int, barrier: Any, url: str, namespace: str, count: int
) -> list[dict[str, Any]]:
    """Merges ``count`` keys of its own, one update_chat each; returns each reply's metadata."""
    store = _ready(url, namespace, CHAT, barrier)
    with store:
        return [
            store.update_chat(CHAT, metadata={f"w{index}-k{j}": [index, j]}).metadata
            for j in range(count)
        ]


def delete_worker(
    index: int, barrier: Any, url: str, namespace: str, chat_ids: list[str]
) -> list[bool]:
    """Deletes every chat of ``chat_ids`` in order; returns what each delete_chat reported."""
    store = _ready(url, namespace, chat_ids[0], barrier)
    with store:
        return [store.delete_chat(chat_id) for chat_id in chat_ids]


# --- tests -------------------------------------------------------------------------------------


@pytest.fixture
def shared(server_backend: str, namespace: str) -> Iterator[ctxstore.Store]:
    """The test's own store on the server, with the chat the workers race on."""
    store = ctxstore.connect(server_backend, namespace=namespace).admin()
    store.upsert_chat(CHAT, OWNER)
    yield store
    store.close()


def _stored_parents(store: ctxstore.Store, chat_id: str) -> dict[str, str | None]:
    """Every message of the chat with the parent pointer the server holds for it."""
    return {node.id: node.parent_id for node in store.get_graph(chat_id).messages}


def _assert_linear_chain(
    store: ctxstore.Store, chat_id: str, expected_ids: set[str]
) -> list[ctxstore.StoredMessage]:
    """``main`` is exactly ``expected_ids``, each once, linked root to head by stored parents."""
    loaded = store.load_branch(chat_id, "main")
    chain = loaded.messages
    ids = [item["id"] for item in chain]
    assert len(ids) == len(set(ids)), "a message is on the chain twice"
    assert set(ids) == expected_ids
    assert len(chain) == len(expected_ids)
    assert loaded.branch.head_message_id == ids[-1]
    assert loaded.branch.message_count == len(expected_ids)
    parents = _stored_parents(store, chat_id)
    assert set(parents) == expected_ids, "the chat holds messages that are not on main"
    assert [parents[message_id] for message_id in ids] == [None, *ids[:-1]]
    [info] = store.list_chats()
    assert info.message_count == len(expected_ids)
    _assert_verified(store, chat_id)
    return chain


def _assert_verified(store: ctxstore.Store, chat_id: str) -> None:
    """Every invariant of the chat holds after the storm (ctxstore verify finds nothing)."""
    report = store.verify_chat(chat_id)
    assert report.ok, report.problems


def _assert_each_worker_in_order(
    chain: list[ctxstore.StoredMessage], per_worker: list[Any]
) -> None:
    position = {item["id"]: place for place, item in enumerate(chain)}
    for worker, appended in enumerate(per_worker):
        places = [position[entry[0]] for entry in appended]
        assert places == sorted(places), f"worker {worker}'s messages are out of order"


def test_rebase_appends_from_many_processes_keep_every_message_once(
    shared: ctxstore.Store, server_backend: str, namespace: str
) -> None:
    """Rebase is the policy for writers that never want to fail: it must never lose a message.

    Eight processes append to one branch, each from the last head it saw. Every acknowledged
    message must be on the final chain exactly once, in one linear chain whose stored parent
    links match its order, with each worker's messages in the order it sent them. ``rebased``
    must tell the truth: an append that was not rebased sits right on the head it expected.
    """
    per_worker = run_workers(
        append_rebase_worker, WORKERS, server_backend, namespace, APPENDS_PER_WORKER
    )

    acknowledged = [entry for appended in per_worker for entry in appended]
    assert len(acknowledged) == WORKERS * APPENDS_PER_WORKER
    acknowledged_ids = {message_id for message_id, *_ in acknowledged}
    assert len(acknowledged_ids) == len(acknowledged), "one id was acknowledged twice"

    chain = _assert_linear_chain(shared, CHAT, acknowledged_ids)
    sent = {message_id: content for message_id, content, *_ in acknowledged}
    assert all(item["message"] == text(sent[item["id"]]) for item in chain)
    _assert_each_worker_in_order(chain, per_worker)

    parents = {item["id"]: item["parent_id"] for item in chain}
    for message_id, _content, expected, rebased in acknowledged:
        if rebased:
            assert parents[message_id] != expected, f"{message_id} was not rebased"
        else:
            assert parents[message_id] == expected, f"{message_id} was rebased unannounced"
    rebased_count = sum(1 for *_, rebased in acknowledged if rebased)
    assert rebased_count > 0, "the workers never raced, so this test proved nothing"


def test_raise_appends_from_many_processes_write_only_what_was_acknowledged(
    shared: ctxstore.Store, server_backend: str, namespace: str
) -> None:
    """With on_conflict="raise" an append is a compare-and-set: it lands on the head it expected
    or writes nothing and reports the head that won.

    Every attempt must end one way or the other; the chain must be exactly the acknowledged
    messages (a refused append leaves no trace, not even outside the chain), each acknowledged
    append's stored parent must be the head it expected, and every head a conflict reported
    must be a message that made it onto the chain.
    """
    per_worker = run_workers(
        append_raise_worker, WORKERS, server_backend, namespace, APPENDS_PER_WORKER
    )

    for worker, report in enumerate(per_worker):
        assert len(report["acknowledged"]) + len(report["conflicts"]) == report["attempts"], (
            f"worker {worker} lost track of an attempt"
        )
    acknowledged = [entry for report in per_worker for entry in report["acknowledged"]]
    conflicts = [entry for report in per_worker for entry in report["conflicts"]]
    assert len(conflicts) > 0, "the workers never raced, so this test proved nothing"
    assert all(not rebased and branch == "main" for *_, rebased, branch in acknowledged)

    acknowledged_ids = {message_id for message_id, *_ in acknowledged}
    assert len(acknowledged_ids) == len(acknowledged), "one id was acknowledged twice"
    chain = _assert_linear_chain(shared, CHAT, acknowledged_ids)

    refused_contents = {content for content, *_ in conflicts}
    on_chain_contents = {item["message"]["content"] for item in chain}
    assert not on_chain_contents & refused_contents, "a refused append was written"
    assert on_chain_contents == {content for _id, content, *_ in acknowledged}

    parents = {item["id"]: item["parent_id"] for item in chain}
    for message_id, _content, expected, *_ in acknowledged:
        assert parents[message_id] == expected, f"{message_id} did not land on its expected head"
    for _content, sent, branch, expected, current in conflicts:
        assert (branch, expected) == ("main", sent)
        assert current != sent, "a conflict was raised although the head had not moved"
        assert current in parents, f"a conflict reported {current!r}, which is not on the chain"
    _assert_each_worker_in_order(chain, [report["acknowledged"] for report in per_worker])


def test_concurrent_auto_named_forks_never_collide(
    shared: ctxstore.Store, server_backend: str, namespace: str
) -> None:
    """Auto-naming happens inside the script so that forking workers never pick the same name.

    Eight processes fork one message 25 times each. Every call must get its own name; the
    names are ``main-v2`` .. ``main-v201`` with no gap (each fork counts the ones before it),
    every fork starts at the shared message and stays inactive, and the chat lists exactly
    ``main`` and those forks, in creation order.
    """
    root = shared.append(CHAT, "main", [text("shared")], expected_head=None)
    shared_message = root.head_message_id

    per_worker = run_workers(
        fork_worker, WORKERS, server_backend, namespace, shared_message, FORKS_PER_WORKER
    )

    created = [entry for forks in per_worker for entry in forks]
    names = [name for name, *_ in created]
    total = WORKERS * FORKS_PER_WORKER
    assert len(names) == total
    assert len(set(names)) == total, "two forks were given the same name"
    pattern = re.compile(r"main-v(\d+)")
    numbers = set()
    for name in names:
        match = pattern.fullmatch(name)
        assert match is not None, f"unexpected branch name {name!r}"
        numbers.add(int(match.group(1)))
    assert numbers == set(range(2, total + 2))
    assert {(head, active, length) for _name, head, active, length in created} == {
        (shared_message, False, 1)
    }

    listed = shared.list_branches(CHAT)
    assert [branch.name for branch in listed] == [
        "main",
        *(f"main-v{k}" for k in range(2, total + 2)),
    ]
    assert all(branch.head_message_id == shared_message for branch in listed)
    assert [branch.name for branch in listed if branch.is_active] == ["main"]
    assert shared.get_chat(CHAT).active_branch == "main"
    _assert_verified(shared, CHAT)
    [info] = shared.list_chats()
    assert info.branch_count == total + 1


def test_concurrent_usage_additions_all_count(
    shared: ctxstore.Store, server_backend: str, namespace: str
) -> None:
    """Usage is added by every worker that calls a model; no addition may be lost.

    100 add_usage calls from five processes: the final totals are the exact sums, every call
    saw a different running total (each addition is applied alone), each worker's totals only
    grow, and the largest total reported is the final one.
    """
    per_worker = run_workers(
        usage_worker, USAGE_WORKERS, server_backend, namespace, USAGE_CALLS_PER_WORKER
    )

    calls = USAGE_WORKERS * USAGE_CALLS_PER_WORKER
    expected_input = sum(range(1, calls + 1))
    expected = {
        "input_tokens": expected_input,
        "output_tokens": 3 * calls,
        "total_tokens": expected_input + 3 * calls,
    }
    assert shared.get_chat(CHAT).metadata["usage"] == expected

    reported = [totals for worker in per_worker for totals in worker]
    assert len(reported) == calls
    seen_inputs = [totals["input_tokens"] for totals in reported]
    assert len(set(seen_inputs)) == calls, "two additions saw the same running total"
    assert max(seen_inputs) == expected_input
    for worker, totals in enumerate(per_worker):
        inputs = [t["input_tokens"] for t in totals]
        assert all(a < b for a, b in itertools.pairwise(inputs)), (
            f"worker {worker} saw its totals stand still or go back: {inputs}"
        )
        for t in totals:
            assert t["total_tokens"] == t["input_tokens"] + t["output_tokens"]


def test_concurrent_metadata_merges_keep_every_key(
    shared: ctxstore.Store, server_backend: str, namespace: str
) -> None:
    """update_chat merges metadata; merges of different keys racing must not drop each other.

    Eight processes each merge ten keys of their own, one call per key. Afterwards every key
    is there with its value, the key set before the race and the title are untouched, and
    each reply already held the key that call merged.
    """
    shared.update_chat(CHAT, title="before", metadata={"origin": "test"})

    per_worker = run_workers(
        metadata_worker, WORKERS, server_backend, namespace, METADATA_KEYS_PER_WORKER
    )

    expected: dict[str, Any] = {"origin": "test"}
    for w in range(WORKERS):
        for j in range(METADATA_KEYS_PER_WORKER):
            expected[f"w{w}-k{j}"] = [w, j]
    meta = shared.get_chat(CHAT)
    assert meta.metadata == expected
    assert meta.title == "before"
    for w, replies in enumerate(per_worker):
        for j, metadata in enumerate(replies):
            assert metadata[f"w{w}-k{j}"] == [w, j]
            assert all(metadata[f"w{w}-k{k}"] == [w, k] for k in range(j))


def test_concurrent_deletes_delete_each_chat_exactly_once(
    shared: ctxstore.Store, server_backend: str, namespace: str
) -> None:
    """delete_chat reports True only to the call that deleted the chat.

    Twenty chats (with messages and a second branch) are deleted by eight processes at once,
    all in the same order. For each chat exactly one call must say True; afterwards nothing of
    any chat is left: not readable, not listed, no key under the namespace.
    """
    shared.delete_chat(CHAT)
    chat_ids = [f"doomed-{n}" for n in range(DELETED_CHATS)]
    for chat_id in chat_ids:
        shared.upsert_chat(chat_id, OWNER, {"n": chat_id})
        first = shared.append(chat_id, "main", [text("a"), text("b")], expected_head=None)
        shared.create_branch(chat_id, first.message_ids[0], activate=False)

    per_worker = run_workers(delete_worker, WORKERS, server_backend, namespace, chat_ids)

    for position, chat_id in enumerate(chat_ids):
        answers = [deleted[position] for deleted in per_worker]
        assert answers.count(True) == 1, f"{chat_id}: {answers}"
        with pytest.raises(ctxstore.ChatNotFoundError):
            shared.get_chat(chat_id)
    assert shared.list_chats() == []
    assert snapshot(server_backend, f"ctx:{namespace}") == {}
