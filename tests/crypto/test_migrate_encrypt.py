"""``migrate(encrypt=True)``: a chat written without encryption is sealed online and in place:
afterwards Redis holds none of its text, a store with encryption reads every part of it back as
it was (same ids, branches, summary, title, metadata, answer stream, expiry), and a store
without encryption refuses it. A write while it is sealed is never lost; a chat with an answer
being streamed into it is left for the next run; a run again changes nothing.

On the embedded store, a redis-server and the Cluster, through the sync and the async shell.
"""

from __future__ import annotations

from typing import Any

import pytest

import ctxstore
from ctxstore._core import protocol
from ctxstore._core.ops import sealing
from ctxstore._core.ops import streams as answer_stream
from ctxstore._core.scripts import load_library, load_script
from ctxstore.errors import ConfigurationError, CorruptionError
from tests.support.keyspace import raw_client
from tests.support.proxy import ReplyDroppingProxy
from tests.support.sealing import contents, every_byte, fill, marker, streamed


def everything(store: Any, ids: list[str], stream_id: str) -> dict[str, Any]:
    """Every part of chat c1 (see ``fill``) as ``store`` reads it."""
    chat = store.get_chat("c1", user_id="alice")
    summary = store.load_branch("c1", user_id="alice", after_summary=True).summary
    return {
        "main": contents(store.load_branch("c1", user_id="alice").messages),
        "side": contents(store.load_branch("c1", "side", user_id="alice").messages),
        "ids": [m["id"] for m in store.load_branch("c1", user_id="alice").messages],
        "metadata": store.get_message("c1", ids[2], user_id="alice")["metadata"],
        "summary": (summary["content"], summary["metadata"]) if summary else None,
        "title": chat.title,
        "chat_metadata": chat.metadata,
        "stream": [piece.text for piece in store.read_stream("c1", stream_id)],
    }


def test_a_chat_in_the_clear_is_sealed_in_place_and_reads_back_as_it_was(
    sealed: Any, plain: Any, backend: str, namespace: str, snap: Any
) -> None:
    _marks, ids = fill(plain)
    stream_id = streamed(plain, "c1", [marker(), "", marker()])
    log = f"ctx:{namespace}:{{c1}}:log"
    client = raw_client(backend)
    try:
        client.pexpire(log, 3_600_000)  # a chat's retention: kept by its sealing
        before = everything(plain, ids, stream_id)
        assert b"MARK" in every_byte(backend, f"ctx:{namespace}")
        with pytest.raises(CorruptionError, match=r"written without encryption|not sealed"):
            sealed.load_branch("c1", user_id="alice")

        report = sealed.migrate(encrypt=True)

        assert (report.encrypt, report.sealed, report.failed) == (True, 1, [])
        assert b"MARK" not in every_byte(backend, f"ctx:{namespace}")
        assert everything(sealed, ids, stream_id) == before
        assert sealed.verify_chat("c1").problems == ()
        assert 0 < client.pttl(log) <= 3_600_000
        assert client.pttl(f"ctx:{namespace}:{{c1}}:summary") == -1  # none before, none after
        assert client.pttl(f"ctx:{namespace}:{{c1}}:stream") > 0  # a stream's own expiry
        assert not any(b":staging:" in key for key in client.scan_iter(f"ctx:{namespace}:*"))
    finally:
        client.close()
    with pytest.raises(ConfigurationError, match="encryption"):
        plain.load_branch("c1", user_id="alice")
    after = snap()
    again = sealed.migrate(encrypt=True)
    assert (again.sealed, again.by_format, again.failed) == (0, {"3": 1}, [])
    assert snap() == after  # a run again seals nothing twice


def test_a_sealed_chat_takes_sealed_writes_after_its_migration(sealed: Any, plain: Any) -> None:
    fill(plain)
    sealed.migrate(encrypt=True)
    head = sealed.load_branch("c1", user_id="alice").messages[-1]["id"]
    word = marker()
    sealed.append(
        "c1", None, [{"role": "user", "content": word}], expected_head=head, user_id="alice"
    )
    assert contents(sealed.load_branch("c1", user_id="alice").messages)[-1] == word


def write_between(backend: str, namespace: str, what: str, late: str) -> None:
    """A write of ``what`` to chat c1 by a process without encryption."""
    with ctxstore.connect(backend, namespace=namespace, encryption=None) as opened:
        writer = opened.for_user("alice")
        if what == "append":
            head = writer.load_branch("c1").messages[-1]["id"]
            writer.append("c1", None, [{"role": "user", "content": late}], expected_head=head)
        elif what == "title":
            writer.update_chat("c1", title=late)
        else:
            writer.update_chat("c1", metadata={"late": late})


@pytest.mark.parametrize("what", ["append", "title", "metadata"])
def test_a_write_while_a_chat_is_sealed_is_sealed_too(
    sealed: Any,
    plain: Any,
    backend: str,
    namespace: str,
    monkeypatch: pytest.MonkeyPatch,
    what: str,
) -> None:
    """A message appended, a title or a metadata value changed between the read and the
    publish: the publish is refused (nothing changes), the chat is read and sealed again, and
    the write is in it."""
    fill(plain)
    late = marker()
    staged = sealing._stage
    writes = []

    def stage_then_write(*args: Any) -> Any:
        result = yield from staged(*args)
        if not writes:
            writes.append(write_between(backend, namespace, what, late))
        return result

    monkeypatch.setattr(sealing, "_stage", stage_then_write)
    report = sealed.migrate(encrypt=True)
    assert (report.sealed, report.failed) == (1, [])
    chat = sealed.get_chat("c1", user_id="alice")
    found = {
        "append": lambda: contents(sealed.load_branch("c1", user_id="alice").messages)[-1],
        "title": lambda: chat.title,
        "metadata": lambda: chat.metadata["late"],
    }[what]()
    assert found == late
    assert b"MARK" not in every_byte(backend, f"ctx:{namespace}")


def test_a_chat_written_throughout_is_left_as_it_was_and_reported(
    sealed: Any, plain: Any, backend: str, namespace: str, snap: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    fill(plain)
    staged = sealing._stage

    def stage_then_write(*args: Any) -> Any:
        result = yield from staged(*args)
        write_between(backend, namespace, "title", marker())
        return result

    monkeypatch.setattr(sealing, "_stage", stage_then_write)
    report = sealed.migrate(encrypt=True)
    assert report.sealed == 0
    assert [failure.chat_id for failure in report.failed] == ["c1"]
    assert "was written while it was sealed" in report.failed[0].error
    assert plain.get_chat("c1", user_id="alice").title  # in the clear, as it was
    assert not any(b":staging:" in key for key in snap())


def test_a_copy_whose_staging_was_lost_is_refused_and_sealed_by_the_next_run(
    sealed: Any, plain: Any, backend: str, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fill(plain)
    staged = sealing._stage

    def stage_then_lose(state: Any, chat: Any, keys: Any, *rest: Any) -> Any:
        result = yield from staged(state, chat, keys, *rest)
        client = raw_client(backend)
        client.delete(keys[0])  # the staged log expired (a process paused past its TTL)
        client.close()
        return result

    monkeypatch.setattr(sealing, "_stage", stage_then_lose)
    report = sealed.migrate(encrypt=True)
    assert (report.sealed, len(report.failed)) == (0, 1)
    assert "lost what its sealing had staged" in report.failed[0].error
    monkeypatch.setattr(sealing, "_stage", staged)
    assert sealed.migrate(encrypt=True).sealed == 1
    assert contents(sealed.load_branch("c1", user_id="alice").messages)


def test_a_chat_with_an_answer_being_streamed_is_left_for_the_next_run(
    sealed: Any, plain: Any, backend: str, namespace: str
) -> None:
    fill(plain)
    state = plain.state
    stream_id = plain.run(answer_stream.begin_stream(state, "c1", "main", writer_ttl_ms=60_000))
    plain.run(answer_stream.write_stream(state, "c1", stream_id, 1, "live", writer_ttl_ms=60_000))

    report = sealed.migrate(encrypt=True)

    assert report.sealed == 0
    assert [failure.chat_id for failure in report.failed] == ["c1"]
    assert "streamed" in report.failed[0].error
    assert contents(plain.load_branch("c1", user_id="alice").messages)  # still in the clear
    left = list(raw_client(backend).scan_iter(f"ctx:{namespace}:*"))
    assert not any(b":staging:" in key for key in left)
    assert not any(b":dkey:" in key for key in left)  # no data key made for a refused seal
    plain.run(
        answer_stream.end_stream(state, "c1", stream_id, done=True, detail="x", keep_ms=60_000)
    )
    assert sealed.migrate(encrypt=True).sealed == 1
    assert [piece.text for piece in sealed.read_stream("c1", stream_id)] == ["live"]


def test_sealing_needs_a_store_with_encryption(plain: Any, snap: Any) -> None:
    fill(plain)
    before = snap()
    with pytest.raises(ConfigurationError, match="encryption"):
        plain.migrate(encrypt=True)
    assert snap() == before


def test_a_dry_run_seals_nothing(sealed: Any, plain: Any, snap: Any) -> None:
    fill(plain)
    before = snap()
    report = sealed.migrate(encrypt=True, dry_run=True)
    assert (report.sealed, report.by_format) == (0, {"2": 1})
    assert snap() == before


def test_a_long_chat_is_sealed_in_chunks(
    sealed: Any, plain: Any, backend: str, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sealing, "CHUNK_RECORDS", 7)
    monkeypatch.setattr(sealing, "CHUNK_ITEMS", 2)
    plain.open_chat("c1", "alice")
    head = None
    words = [marker() for _ in range(30)]
    for word in words:
        head = plain.append(
            "c1", None, [{"role": "user", "content": word}], expected_head=head, user_id="alice"
        ).head_message_id
    pieces = [marker() for _ in range(5)]
    stream_id = streamed(plain, "c1", pieces)
    assert sealed.migrate(encrypt=True).sealed == 1
    assert contents(sealed.load_branch("c1", user_id="alice").messages) == words
    assert [piece.text for piece in sealed.read_stream("c1", stream_id)] == pieces
    assert b"MARK" not in every_byte(backend, f"ctx:{namespace}")


def test_a_chunk_or_a_publish_resent_after_its_reply_was_lost_is_applied_once(
    redis_server: Any, namespace: str, provider: Any
) -> None:
    """The store sends a call again when its reply is lost: the staging chunk (chat c1) and
    the publish (chat c2) are each applied once, and each run reports its chat sealed."""
    direct = f"redis://127.0.0.1:{redis_server.port}/0"
    client = raw_client(direct)
    for name in ("seal_stage", "seal_publish"):  # loaded: the dropped reply is the call's own
        client.script_load(load_script(name).source)
    client.function_load(load_library().code, replace=True)
    with ReplyDroppingProxy("127.0.0.1", redis_server.port) as proxy:
        url = f"redis://127.0.0.1:{proxy.port}/0"
        plain = ctxstore.connect(url, namespace=namespace, encryption=None).admin()
        sealed = ctxstore.connect(url, namespace=namespace, encryption=provider).admin()
        for chat_id, lost in (("c1", "seal_stage"), ("c2", "seal_publish")):
            fill(plain, chat_id=chat_id)
            words = contents(plain.load_branch(chat_id, user_id="alice").messages)
            proxy.drop_next_reply(
                (load_script(lost).sha.encode(), load_script(lost).function.encode())
            )
            report = sealed.migrate(encrypt=True)
            assert proxy.dropped == 1
            proxy.dropped = 0
            assert (report.sealed, report.failed) == (1, [])
            assert contents(sealed.load_branch(chat_id, user_id="alice").messages) == words
            assert sealed.verify_chat(chat_id).problems == ()
        assert not any(b":staging:" in key for key in client.scan_iter(f"ctx:{namespace}:*"))
        assert b"MARK" not in every_byte(direct, f"ctx:{namespace}")
    client.close()


def test_a_chat_at_the_bounds_is_sealed_within_every_commands_arguments(
    backend: str, namespace: str, provider: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """1,900 metadata keys (the ceiling), 600 summaries and a stream of 600 pieces: every call
    of the sealing stays within the 3,999 arguments managed services take (checked on the
    client, as the Valkey pass of .ci/run checks every call)."""
    monkeypatch.setattr(protocol, "CHECK_ARGUMENTS", True)
    limits = ctxstore.Limits(max_metadata_keys=1_900, max_metadata_bytes=1 << 20)
    options: dict[str, Any] = {"namespace": namespace, "limits": limits, "estimate_tokens": len}
    with ctxstore.connect(backend, encryption=None, **options) as opened:
        plain = opened.admin()
        plain.open_chat("c1", "alice", metadata={f"k{n}": marker() for n in range(1_900)})
        ids = plain.append(
            "c1", None, [{"role": "user", "content": marker()} for _ in range(600)],
            expected_head=None,
        ).message_ids  # fmt: skip
        for message_id in ids:
            plain.write_summary("c1", message_id, marker())
        pieces = [marker() for _ in range(600)]
        stream_id = streamed(plain, "c1", pieces)
    with ctxstore.connect(backend, encryption=provider, **options) as opened:
        sealed = opened.admin()
        assert sealed.migrate(encrypt=True).sealed == 1
        assert len(sealed.get_chat("c1").metadata) == 1_900
        assert [piece.text for piece in sealed.read_stream("c1", stream_id)] == pieces
    assert b"MARK" not in every_byte(backend, f"ctx:{namespace}")
