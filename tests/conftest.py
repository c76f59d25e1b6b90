"""Test session: real servers, backends, and store fixtures.

The store suite runs on every combination of backend (the embedded store, a standalone
redis-server, a 3-master Redis Cluster) and shell (sync, async), each test in a namespace of its
own so tests never see each other's data. ``CTXSTORE_TEST_SERVER=valkey`` runs the servers'
part on Valkey instead (see tests/support/servers.py).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import ctxstore
from tests.support import encrypted_pass, servers
from tests.support.facade import LoopThread, SyncOverAsync

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

#: The backends the store suite runs on (tests/support/servers.py: ``backends``).
BACKENDS = servers.backends()


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[servers.RedisProcess]:
    with servers.standalone(tmp_path_factory.mktemp("redis")) as server:
        yield server


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[servers.Cluster]:
    with servers.cluster(tmp_path_factory.mktemp("cluster")) as running:
        yield running


@pytest.fixture(scope="session")
def loop_thread() -> Iterator[LoopThread]:
    thread = LoopThread()
    yield thread
    thread.stop()


def backend_url(request: pytest.FixtureRequest, kind: str) -> str:
    """The URL of one backend; memory URLs are named per test so sync and async share them."""
    if kind == "memory":
        return f"memory://{uuid.uuid4().hex}"
    if kind == "redis":
        server: servers.RedisProcess = request.getfixturevalue("redis_server")
        return server.url
    running: servers.Cluster = request.getfixturevalue("redis_cluster")
    return running.url


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """The URL of each backend in turn: embedded, standalone server, Cluster."""
    return backend_url(request, request.param)


@pytest.fixture(params=[name for name in BACKENDS if name != "memory"])
def server_backend(request: pytest.FixtureRequest) -> str:
    """Only the real servers (for tests that span processes or read server statistics)."""
    return backend_url(request, request.param)


@pytest.fixture
def namespace() -> str:
    return f"t{uuid.uuid4().hex[:12]}"


class Clock:
    """A settable clock in epoch milliseconds; each read moves it on by one."""

    def __init__(self, start: int = 1_700_000_000_000) -> None:
        self.now = start

    def __call__(self) -> int:
        self.now += 1
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


def encryption_options() -> dict[str, Any]:
    """``{"encryption": <the pass's provider>}`` in the encrypted pass (tests/support/
    encrypted_pass.py), else nothing."""
    found = encrypted_pass.provider()
    return {} if found is None else {"encryption": found}


#: The shells the store fixture runs each test through. They share one logic core and send the
#: same commands, so a Valkey run (what differs there is the server), the encrypted pass (what
#: differs is the values; tests/crypto runs both shells on sealed chats) and the pass on the
#: EVALSHA scripts (``CTXSTORE_SCRIPTING=scripts``: what differs is how the Lua is called;
#: tests/store/test_functions.py runs both shells on both ways) take the sync one only.
SHELLS = (
    ("sync", "async")
    if servers.server_kind() == "redis"
    and not encrypted_pass.ENCRYPTED
    and os.environ.get("CTXSTORE_SCRIPTING", "") in ("", "auto")
    else ("sync",)
)


@pytest.fixture(params=SHELLS)
def store(
    request: pytest.FixtureRequest,
    backend: str,
    namespace: str,
    clock: Clock,
    loop_thread: LoopThread,
) -> Iterator[Any]:
    """A store on ``backend`` through the sync shell or (wrapped) the async shell, as its
    ``admin()`` handle: the suite's tests of what the store does act on their chats as an
    operator, with or without ``user_id``; what the plain store and a user's handle allow is
    tested on its own (tests/store/test_scopes.py)."""
    if request.param == "sync":
        sync_store = ctxstore.connect(
            backend, namespace=namespace, clock=clock, **encryption_options()
        )
        yield sync_store.admin()
        sync_store.close()
        return
    async_store = ctxstore.connect_async(
        backend, namespace=namespace, clock=clock, **encryption_options()
    )
    yield SyncOverAsync(async_store.admin(), loop_thread)
    loop_thread.run(async_store.close())


@pytest.fixture
def sync_store(backend: str, namespace: str, clock: Clock) -> Iterator[ctxstore.AdminStore]:
    """The sync shell only (tests about transport details), as its ``admin()`` handle."""
    opened = ctxstore.connect(backend, namespace=namespace, clock=clock, **encryption_options())
    yield opened.admin()
    opened.close()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if Path(str(item.fspath)).name.startswith("test_concurrency"):
            item.add_marker(pytest.mark.slow)


@pytest.fixture
def snap(backend: str, namespace: str) -> Any:
    """A callable returning every key of the test's namespace with its content."""
    from tests.support.keyspace import snapshot

    return lambda: snapshot(backend, f"ctx:{namespace}")


@pytest.fixture
def make_engine(store: Any, loop_thread: LoopThread) -> Any:
    """A factory of context engines on the ``store`` fixture's backend and shell (sync/async)."""

    def make(**kwargs: Any) -> Any:
        kwargs.setdefault("chat_id", "c1")
        kwargs.setdefault("user_id", "alice")
        if isinstance(store, SyncOverAsync):
            engine = ctxstore.AsyncContextEngine(store=store.wrapped, **kwargs)
            return SyncOverAsync(engine, loop_thread)
        return ctxstore.ContextEngine(store=store, **kwargs)

    make.store = store  # type: ignore[attr-defined]
    return make


#: Whether this session is the encrypted pass (tests/support/encrypted_pass.py).
ENCRYPTED = encrypted_pass.ENCRYPTED
