"""A reader process for the answer stream tests:
``python -m tests.support.stream_reader SHELL URL NS CHAT STREAM_ID``.

Follows the stream through the sync or the async store (SHELL), prints ``joined`` after its first
piece, drops its connection after the second (closes the reader and the store, as a page reload
or a dying web worker would), connects again, resumes with ``after=`` the last piece it got,
prints ``resumed`` after the first piece of the resumed read, and at the end prints one JSON
line: the pieces before and after the reconnection, as [id, text] pairs.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import ctxstore

BEFORE = 2


def say(line: str) -> None:
    print(line, flush=True)


def read_sync(url: str, namespace: str, chat_id: str, stream_id: str) -> dict[str, Any]:
    store = ctxstore.connect(url, namespace=namespace).admin()
    reading = store.read_stream(chat_id, stream_id, user_id="alice")
    before = []
    for piece in reading:
        before.append(piece)
        if len(before) == 1:
            say("joined")
        if len(before) == BEFORE:
            break
    reading.close()
    store.close()
    store = ctxstore.connect(url, namespace=namespace).admin()
    after = []
    for piece in store.read_stream(chat_id, stream_id, after=before[-1].id, user_id="alice"):
        after.append(piece)
        if len(after) == 1:
            say("resumed")
    store.close()
    return {"before": before, "after": after}


async def read_async(url: str, namespace: str, chat_id: str, stream_id: str) -> dict[str, Any]:
    store = ctxstore.connect_async(url, namespace=namespace).admin()
    reading = store.read_stream(chat_id, stream_id, user_id="alice")
    before = []
    async for piece in reading:
        before.append(piece)
        if len(before) == 1:
            say("joined")
        if len(before) == BEFORE:
            break
    await reading.aclose()
    await store.close()
    store = ctxstore.connect_async(url, namespace=namespace).admin()
    after = []
    async for piece in store.read_stream(chat_id, stream_id, after=before[-1].id, user_id="alice"):
        after.append(piece)
        if len(after) == 1:
            say("resumed")
    await store.close()
    return {"before": before, "after": after}


def main() -> None:
    shell, url, namespace, chat_id, stream_id = sys.argv[1:6]
    if shell == "sync":
        read = read_sync(url, namespace, chat_id, stream_id)
    else:
        read = asyncio.run(read_async(url, namespace, chat_id, stream_id))
    say(json.dumps({part: [[p.id, p.text] for p in pieces] for part, pieces in read.items()}))


if __name__ == "__main__":
    main()
