"""Helpers of the encryption tests: a store with or without a key provider, chats filled
with random markers, and every byte Redis holds under a namespace (to look for them)."""

from __future__ import annotations

import uuid
from typing import Any

import ctxstore
from ctxstore import NewMessage
from tests.conftest import Clock
from tests.support.facade import LoopThread, SyncOverAsync
from tests.support.keyspace import raw_client, snapshot


def connect(backend: str, namespace: str, clock: Clock, provider: Any, shell: str,
            loop_thread: LoopThread) -> tuple[Any, Any]:  # fmt: skip
    """An admin handle of a store with ``provider`` (None: without encryption), and its
    closer."""
    if shell == "sync":
        opened = ctxstore.connect(backend, namespace=namespace, clock=clock, encryption=provider)
        return opened.admin(), opened.close
    made = ctxstore.connect_async(backend, namespace=namespace, clock=clock, encryption=provider)
    return SyncOverAsync(made.admin(), loop_thread), lambda: loop_thread.run(made.close())


def marker() -> str:
    return f"MARK{uuid.uuid4().hex}"


def every_byte(backend: str, base: str) -> bytes:
    """Every key name and value under ``<base>:``, read by type (no compressed dump)."""
    client = raw_client(backend)
    try:
        out = []
        for key, (kind, _content) in snapshot(backend, base).items():
            out.append(key)
            if kind == "list":
                out += client.lrange(key, 0, -1)
            elif kind == "hash":
                for field, value in client.hgetall(key).items():
                    out += [field, value]
            elif kind == "zset":
                out += [member for member, _score in client.zrange(key, 0, -1, withscores=True)]
            elif kind == "string":
                out.append(client.get(key))
            elif kind == "stream":
                for _id, fields in client.xrange(key):
                    for field, value in fields.items():
                        out += [field, value]
        return b"\n".join(out)
    finally:
        client.close()


def fill(store: Any, chat_id: str = "c1", user: str = "alice") -> tuple[list[str], list[str]]:
    """A chat of three messages (one with metadata), a fork, a summary, a title and chat
    metadata; the markers in them, and the ids of the main branch."""
    marks = [marker() for _ in range(10)]
    store.open_chat(chat_id, user, metadata={"topic": marks[7]})
    first = store.append(
        chat_id, None, [{"role": "user", "content": marks[0]}], expected_head=None, user_id=user
    )
    second = store.append(
        chat_id,
        None,
        [
            {"role": "assistant", "content": marks[1]},
            NewMessage({"role": "user", "content": marks[2]}, metadata={"note": marks[3]}),
        ],
        expected_head=first.head_message_id,
        user_id=user,
    )
    store.create_branch(chat_id, first.head_message_id, name="side", activate=False, user_id=user)
    store.append(
        chat_id, "side", [{"role": "assistant", "content": marks[4]}],
        expected_head=first.head_message_id, user_id=user,
    )  # fmt: skip
    store.write_summary(
        chat_id, second.message_ids[0], marks[5], metadata={"note": marks[6]}, user_id=user
    )
    store.update_chat(chat_id, title=marks[8], metadata={"tags": [marks[9]]}, user_id=user)
    return marks, [first.head_message_id, *second.message_ids]


def contents(messages: list[Any]) -> list[str]:
    return [message["message"]["content"] for message in messages]


def streamed(store: Any, chat_id: str, pieces: list[str]) -> str:
    """An answer stream of ``pieces``, finished; its id."""
    from ctxstore._core.ops import streams as answer_stream

    state = store.state
    stream_id = store.run(answer_stream.begin_stream(state, chat_id, "main", writer_ttl_ms=60_000))
    for number, piece in enumerate(pieces, start=1):
        store.run(
            answer_stream.write_stream(
                state, chat_id, stream_id, number, piece, writer_ttl_ms=60_000
            )
        )
    store.run(
        answer_stream.end_stream(state, chat_id, stream_id, done=True, detail="x", keep_ms=60_000)
    )
    return str(stream_id)
