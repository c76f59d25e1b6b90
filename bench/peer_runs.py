"""The peers at chain length N, each interleaved with ctxstore doing the same thing.

For every peer, two loops: append one message, and load every message of the conversation.
Each loop alternates the peer's call with ctxstore's (``store.append`` onto the previous head;
``load_branch`` by a store whose cache is empty, since a peer has no cache to help it) and with
``PING``, so the headline ratio, peer over ctxstore, is taken under the same noise. A peer whose
package is missing, or that fails on this server, is skipped with a one-line reason.
"""

from __future__ import annotations

import importlib
import itertools
import tempfile
from pathlib import Path
from typing import Any

from floors import PING, Floors
from peers import PeerUnavailableError
from results import Timed, timed
from stores import forget, open_store
from timing import interleave
from workload import USER_ID, build_chat, build_pool, messages

SCENARIO = "peers"
MODULES = ("sqlite_cte", "langchain_redis", "openai_agents", "llama_index_redis")
CTX_APPEND = "ctxstore store.append"
CTX_LOAD = "ctxstore load_branch (cold)"


def _fill(peer: Any, length: int) -> None:
    for message in messages(length):
        peer.append(message)
    got = len(peer.load())
    if got != length:
        raise PeerUnavailableError(f"loaded {got} messages after storing {length}")


def _peer_rows(
    peer: Any, label: str, url: str, store: Any, length: int, iterations: int, warmup: int
) -> list[Timed]:
    """The append loop and the load loop for one peer, with ctxstore and PING beside it."""
    pool = build_pool(store, f"peer-{label}-append-{length}", length, iterations + warmup)
    turn = itertools.count(length)

    def ctx_append() -> None:
        chat = pool.take()
        result = store.append(
            chat.chat_id, "main", messages(1, chat.length), expected_head=chat.head, user_id=USER_ID
        )
        chat.head = result.head_message_id
        chat.length += 1

    floors = Floors(store.client, pool.chats[0].chat_id)
    extra = peer.floors()
    appended = interleave(
        lambda: peer.append(messages(1, next(turn))[0]),
        {CTX_APPEND: ctx_append, PING: floors.ping, **extra},
        iterations,
        warmup,
        settle=floors.ping,
    )
    chat = build_chat(store, f"peer-{label}-read-{length}", length)
    reader = open_store(url, cold=True)
    try:
        loaded = interleave(
            peer.load,
            {
                CTX_LOAD: lambda: reader.load_branch(chat.chat_id, user_id=USER_ID),
                PING: floors.ping,
                **extra,
            },
            iterations,
            warmup,
            before_each=lambda: forget(reader),
            settle=floors.ping,
        )
    finally:
        reader.close()
    floors.cleanup()
    return [
        timed(SCENARIO, "append 1 message", peer.name, length, appended, CTX_APPEND),
        timed(SCENARIO, "load all messages", peer.name, length, loaded, CTX_LOAD),
    ]


def run_peers(
    url: str, store: Any, length: int, iterations: int, warmup: int, say: Any
) -> list[Timed | dict[str, str]]:
    """Every peer in turn; a skipped one leaves ``{"peer", "package", "skipped"}``."""
    rows: list[Timed | dict[str, str]] = []
    with tempfile.TemporaryDirectory(prefix="ctxstore-bench-peers-") as folder:
        for name in MODULES:
            module = importlib.import_module(f"peers.{name}")
            try:
                peer = module.open_peer(url, Path(folder))
            except PeerUnavailableError as reason:
                say(f"skipping peer {module.NAME}: {reason}")
                rows.append(
                    {"peer": module.NAME, "package": module.PACKAGE, "skipped": str(reason)}
                )
                continue
            try:
                _fill(peer, length)
                rows.extend(_peer_rows(peer, name, url, store, length, iterations, warmup))
            except PeerUnavailableError as reason:
                say(f"skipping peer {module.NAME}: {reason}")
                rows.append(
                    {"peer": module.NAME, "package": module.PACKAGE, "skipped": str(reason)}
                )
            except Exception as error:  # a peer that breaks here is reported, not fatal
                line = f"{type(error).__name__}: {error}".splitlines()[0]
                say(f"skipping peer {module.NAME}: it failed ({line})")
                rows.append({"peer": module.NAME, "package": module.PACKAGE, "skipped": line})
            finally:
                peer.close()
    return rows
