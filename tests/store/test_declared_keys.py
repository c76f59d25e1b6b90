"""The declared-keys check (``CTXSTORE_CHECK_DECLARED_KEYS``, set for the Valkey pass of
.ci/run): a script that touches a key it did not declare, or runs with no keys at all, is
refused on every backend, as ElastiCache Serverless and other proxies refuse it; a script that
keeps to its KEYS runs as before."""

from __future__ import annotations

from typing import Any

import pytest
from redis.exceptions import ResponseError

from ctxstore._core.scripts import _library, needed_library, script_dir, with_key_check
from tests.support.keyspace import raw_client


def checked(body: str) -> str:
    """``body`` with the library it uses and the check, as the loader builds it."""
    return with_key_check(f"{needed_library(_library(script_dir()), body)}\n{body}")


@pytest.fixture
def client(server_or_memory: str) -> Any:
    opened = raw_client(server_or_memory)
    yield opened
    opened.close()


@pytest.fixture(params=["memory", "redis"])
def server_or_memory(request: pytest.FixtureRequest) -> str:
    from tests.conftest import backend_url

    return backend_url(request, request.param)


def test_a_script_keeping_to_its_keys_runs(client: Any) -> None:
    body = (
        "return run(function() redis.call('SET', KEYS[1], 'v')"
        " return redis.call('GET', KEYS[1]) end)"
    )
    assert client.eval(checked(body), 1, "{t}declared") == b"v"


@pytest.mark.parametrize(
    "body",
    [
        "return run(function() return redis.call('GET', '{t}other') end)",
        "return run(function() return redis.call('DEL', KEYS[1], '{t}other') end)",
        "return run(function() return redis.call('RENAME', KEYS[1], '{t}other') end)",
    ],
)
def test_a_key_the_script_did_not_declare_is_refused(client: Any, body: str) -> None:
    client.set("{t}declared", "v")
    with pytest.raises(ResponseError, match=r"CTX_UNDECLARED.*other"):
        client.eval(checked(body), 1, "{t}declared")
    assert client.get("{t}declared") == b"v"


def test_a_script_with_no_keys_is_refused(client: Any) -> None:
    with pytest.raises(ResponseError, match=r"CTX_UNDECLARED.*no KEYS"):
        client.eval(checked("return run(function() return 1 end)"), 0)
