"""The web console's fixtures: a seeded chat with branches, a checkpoint and a summary, on the
embedded store and a redis-server."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest
import uvicorn
from starlette.testclient import TestClient

import ctxstore
import ctxstore.web
from ctxstore.models import NewMessage
from tests.conftest import backend_url

USER = "alice"


@dataclass
class Seeded:
    """The chat ``trip`` (main: 30 messages; ``main-v2`` from message 10, 3 messages;
    ``main-v3`` from message 20, 2 messages, active; checkpoint ``before-booking`` at message
    15; a summary through message 12) and the ids of main's messages."""

    store: ctxstore.Store
    url: str
    namespace: str
    main: tuple[str, ...]
    v2: tuple[str, ...]
    v3: tuple[str, ...]


def say(i: int) -> dict[str, Any]:
    role = "user" if i % 2 == 0 else "assistant"
    return {"role": role, "content": f"turn {i}: a day in Lisbon"}


def seed(store: ctxstore.Store) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    store.upsert_chat("trip", USER, {"team": "travel"})
    store.update_chat("trip", title="Lisbon trip")
    main = store.append(
        "trip", "main", [NewMessage(say(i)) for i in range(30)], expected_head=None
    ).message_ids
    v2 = store.create_branch("trip", main[9], activate=False)
    v2_ids = store.append(
        "trip", v2.name,
        [NewMessage({"role": "assistant", "content": f"another answer {i}"}) for i in range(3)],
        expected_head=main[9],
    ).message_ids  # fmt: skip
    v3 = store.create_branch("trip", main[19], activate=True)
    v3_ids = store.append(
        "trip", v3.name,
        [NewMessage({"role": "assistant", "content": f"a third answer {i}"}) for i in range(2)],
        expected_head=main[19],
    ).message_ids  # fmt: skip
    store.upsert_checkpoint("trip", "before-booking", main[14])
    store.write_summary("trip", main[11], "They planned three days in Lisbon.", tokens=9)
    return main, v2_ids, v3_ids


@pytest.fixture(params=["memory", "redis"])
def seeded(request: pytest.FixtureRequest, namespace: str) -> Iterator[Seeded]:
    url = backend_url(request, request.param)
    store = ctxstore.connect(url, namespace=namespace).admin()
    main, v2, v3 = seed(store)
    yield Seeded(store, url, namespace, main, v2, v3)
    store.close()


@pytest.fixture
def client(seeded: Seeded) -> Iterator[TestClient]:
    with TestClient(ctxstore.web.app(seeded.store), follow_redirects=False) as test_client:
        yield test_client


@contextmanager
def serving(app: Any) -> Iterator[str]:
    """``app`` on a uvicorn server in a thread, on a free loopback port: its base URL. For what
    Starlette's test client cannot do on every version it supports (read an endless stream as it
    comes), and for the browser."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        assert thread.is_alive(), "the server stopped before it started"
        assert time.monotonic() < deadline, "the server did not start within 15 s"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
