"""A frozen server fails a call fast, with a ctxstore error: defaults of 2 s to connect and
5 s for a reply, overridable as redis-py options."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest

import ctxstore
from ctxstore.store.connection import DEFAULT_CONNECT_TIMEOUT, DEFAULT_SOCKET_TIMEOUT
from tests.support.proxy import HangingProxy


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A port that accepts connections and never answers (a frozen server)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    yield listener.getsockname()[1]
    listener.close()


def test_the_defaults_fail_fast() -> None:
    store = ctxstore.connect("redis://127.0.0.1:1/0").admin()
    options = store.client.connection_pool.connection_kwargs
    assert options["socket_connect_timeout"] == DEFAULT_CONNECT_TIMEOUT == 2.0
    assert options["socket_timeout"] == DEFAULT_SOCKET_TIMEOUT == 5.0
    store.close()


def test_a_frozen_server_is_a_backend_error_within_the_timeout(silent_server: int) -> None:
    store = ctxstore.connect(
        f"redis://127.0.0.1:{silent_server}/0", redis_options={"socket_timeout": 0.2}
    ).admin()
    started = time.monotonic()
    with pytest.raises(ctxstore.errors.BackendError):
        store.get_chat("c1")
    assert time.monotonic() - started < 3  # three attempts at most, each bounded
    store.close()


def test_a_timed_out_command_is_not_sent_again(redis_server: Any) -> None:
    """Only the open connection froze: the call fails once, after socket_timeout, and the
    script was sent once (it may have run: sending it again could apply it twice)."""
    proxy = HangingProxy("127.0.0.1", redis_server.port)
    store = ctxstore.connect(
        f"redis://127.0.0.1:{proxy.port}/0",
        namespace="timeouts",
        redis_options={"socket_timeout": 0.5},
    ).admin()
    store.upsert_chat("c1", "alice")
    store.update_chat("c1", title="before")
    # (A store with encryption seals the title for the incarnation its append saw: the write
    # is then its first command, as without.)
    store.append("c1", None, [{"role": "user", "content": "hi"}], expected_head=None)
    proxy.hang()
    sent = proxy.sent
    started = time.monotonic()
    with pytest.raises(ctxstore.errors.BackendTimeoutError) as caught:
        store.update_chat("c1", title="after", user_id="alice")
    assert "may have been applied" in str(caught.value)
    elapsed = time.monotonic() - started
    assert proxy.sent == sent + 1
    assert 0.4 < elapsed < 0.9
    store.close()
    proxy.close()
