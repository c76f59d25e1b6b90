"""The stores the encryption tests compare: one with a key provider, one without, on the
test's backend and shell (sync, or async through a loop thread)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from ctxstore.crypto import LocalKeyProvider
from tests.conftest import SHELLS, Clock
from tests.support.facade import LoopThread
from tests.support.sealing import connect


@pytest.fixture
def provider() -> LocalKeyProvider:
    return LocalKeyProvider.from_keys({"kek-a": os.urandom(32)}, current="kek-a")


@pytest.fixture(params=SHELLS)
def shell(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def sealed(
    backend: str,
    namespace: str,
    clock: Clock,
    provider: LocalKeyProvider,
    shell: str,
    loop_thread: LoopThread,
) -> Iterator[Any]:
    store, close = connect(backend, namespace, clock, provider, shell, loop_thread)
    yield store
    close()


@pytest.fixture
def plain(
    backend: str, namespace: str, clock: Clock, shell: str, loop_thread: LoopThread
) -> Iterator[Any]:
    store, close = connect(backend, namespace, clock, None, shell, loop_thread)
    yield store
    close()
