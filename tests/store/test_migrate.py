"""``migrate``: the keyspace marked with this release's format, every chat brought to it, online,
resumable and idempotent; ``dry_run`` counts; a chat that cannot be migrated is reported and
left; a keyspace a newer release marked refuses this release. On the embedded store, a
redis-server and a Cluster, sync and async."""

from __future__ import annotations

import threading
from typing import Any

import pytest

import ctxstore
from ctxstore.errors import FormatError, ScopeError, ValidationError
from ctxstore.models import MigrationProgress
from tests.store.test_erasure import plain_dump
from tests.support.keyspace import raw_client


@pytest.fixture
def url_store(store: Any, backend: str) -> Any:
    store.url = backend
    return store


def seed(store: Any, count: int, user: str = "alice") -> list[str]:
    chats = [f"c{number}" for number in range(count)]
    for chat_id in chats:
        store.upsert_chat(chat_id, user)
        store.append(
            chat_id,
            "main",
            [{"role": "user", "content": chat_id}],
            expected_head=None,
            user_id=user,
        )
    return chats


def set_field(store: Any, chat_id: str, field: str, value: str) -> None:
    raw = raw_client(store.url)
    raw.hset(store.state.keyspace.chat(chat_id).key("chat"), field, value)
    raw.close()


def marker(store: Any) -> dict[str, str]:
    raw = raw_client(store.url)
    found = raw.hgetall(store.state.keyspace.format_marker)
    raw.close()
    return {key.decode(): value.decode() for key, value in found.items()}


def written(store: Any) -> str:
    """The format the store creates chats in: 2, or 3 (sealed) for a store with encryption."""
    return "3" if store.state.settings.encryption is not None else "2"


def base(store: Any) -> str:
    return str(store.state.keyspace.base)


def test_a_dry_run_counts_the_chats_by_format_and_changes_nothing(url_store: Any) -> None:
    store = url_store
    seed(store, 5)
    set_field(store, "c1", "fmt", "4")  # a newer release's
    set_field(store, "c2", "fmt", "v2")
    before = plain_dump(store.url, base(store))
    report = store.migrate(dry_run=True)
    assert report.dry_run
    assert not report.marked
    assert (report.format, report.previous_format) == ("2", "2")
    assert report.by_format == {written(store): 3, "4": 1, "v2": 1}
    assert report.chats == 5
    assert report.upgraded == 0
    assert plain_dump(store.url, base(store)) == before


def test_migrate_marks_the_keyspace_reports_what_it_cannot_migrate_and_goes_on(
    url_store: Any,
) -> None:
    store = url_store
    chats = seed(store, 6)
    set_field(store, "c1", "fmt", "1")  # a chat of ctxstore 0.1
    set_field(store, "c4", "inc", "NOT-AN-INCARNATION")
    failed_before = {
        chat_id: plain_dump(store.url, f"{base(store)}:{{{chat_id}}}") for chat_id in ("c1", "c4")
    }
    report = store.migrate()
    assert report.marked
    assert not report.dry_run
    assert marker(store)["format"] == "2"
    assert marker(store)["release"] == ctxstore.__version__
    assert report.chats == 6
    assert report.upgraded == 0
    assert sorted(failure.chat_id for failure in report.failed) == ["c1", "c4"]
    errors = {failure.chat_id: failure.error for failure in report.failed}
    assert "format 1" in errors["c1"]
    assert "reads format 2" in errors["c1"]
    assert "'inc'" in errors["c4"]
    assert report.by_format[written(store)] == 4
    for chat_id, dump in failed_before.items():  # left as they were
        assert plain_dump(store.url, f"{base(store)}:{{{chat_id}}}") == dump
    for chat_id in set(chats) - {"c1", "c4"}:  # the others are read as ever
        chain = store.load_branch(chat_id, "main")
        assert [m["message"]["content"] for m in chain.messages] == [chat_id]
    # Idempotent: a second run marks nothing, writes nothing, finds the same.
    before = plain_dump(store.url, base(store))
    again = store.migrate()
    assert not again.marked
    assert not again.resumed
    assert (again.chats, again.upgraded, len(again.failed)) == (6, 0, 2)
    assert plain_dump(store.url, base(store)) == before


class StopRunError(Exception):
    pass


def test_an_interrupted_migrate_goes_on_from_where_it_stopped(url_store: Any) -> None:
    store = url_store
    seed(store, 120)  # several scan steps of keys
    seen: list[MigrationProgress] = []

    def stop_after_one(progress: MigrationProgress) -> None:
        # The server's keyspace holds other tests' namespaces too: a step may find none of ours.
        if 0 < progress.done < 120:
            seen.append(progress)
            raise StopRunError

    with pytest.raises(StopRunError):
        store.migrate(progress=stop_after_one)
    first = seen[0].done
    assert 0 < first < 120
    assert seen[0].total == 120
    report = store.migrate(progress=seen.append)
    assert report.resumed
    assert not report.marked
    assert report.chats < 120  # the chats of the first step are not walked again
    assert seen[-1].done == report.chats
    assert seen[-1].rate > 0
    assert f"{base(store)}:migrating".encode() not in plain_dump(store.url, base(store))
    assert not store.migrate().resumed  # a finished walk leaves no place to resume from


def test_migrate_runs_while_writers_write(url_store: Any, backend: str) -> None:
    if backend.startswith("memory"):
        pytest.skip("the embedded store has no second connection to write through")
    store = url_store
    seed(store, 30)
    connection = ctxstore.connect(store.url, namespace=store.state.keyspace.namespace)
    writer = connection.for_user("alice")
    stop, written = threading.Event(), []

    def write() -> None:
        number = 0
        while not stop.is_set():
            chat_id = f"w{number}"
            writer.upsert_chat(chat_id)
            writer.append(chat_id, "main", [{"role": "user", "content": "x"}], expected_head=None)
            written.append(chat_id)
            number += 1

    thread = threading.Thread(target=write)
    thread.start()
    try:
        report = store.migrate()
        store.migrate()
    finally:
        stop.set()
        thread.join()
        connection.close()
    assert not report.failed
    assert written
    for chat_id in written:
        assert store.verify_chat(chat_id).problems == ()


def test_a_keyspace_a_newer_release_marked_refuses_this_one(backend: str, namespace: str) -> None:
    admin = ctxstore.connect(backend, namespace=namespace).admin()
    admin.upsert_chat("c1", "alice")
    raw = raw_client(backend)
    raw.hset(admin._state.keyspace.format_marker, mapping={"format": "3", "release": "9.1.0"})
    raw.close()
    fresh = ctxstore.connect(backend, namespace=namespace)
    fresh._state.caches.remember_marker(None)  # as in a process that starts after, or a minute on
    user = fresh.for_user("alice")
    for call in (lambda: user.get_chat("c1"), lambda: user.upsert_chat("c2")):
        with pytest.raises(FormatError) as refused:
            call()
        assert "format 3" in str(refused.value)
        assert "9.1.0" in str(refused.value)
        assert refused.value.details["install"] == "9.1.0"
    for dry_run in (False, True):
        with pytest.raises(FormatError):
            fresh.admin().migrate(dry_run=dry_run)
    fresh.close()
    admin.close()


def test_migrate_is_an_operators_call_and_checks_its_options(backend: str, namespace: str) -> None:
    plain = ctxstore.connect(backend, namespace=namespace)
    with pytest.raises(ScopeError):
        plain.migrate()
    with pytest.raises(ValidationError):
        plain.admin().migrate(pause=-1)
    assert not hasattr(plain.for_user("alice"), "migrate")
    plain.close()
