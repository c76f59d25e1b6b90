"""Redis errors map onto the ctxstore tree in one place; the driver recovers from NOSCRIPT."""

from __future__ import annotations

from typing import Any

import pytest
import redis.exceptions as rexc

import ctxstore
from ctxstore._core import failures
from ctxstore._core.protocol import Exchange, Operation, command_call, script_call
from ctxstore._core.scripts import load_script


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (
            rexc.ResponseError("BUSY Redis is busy running a script."),
            ctxstore.errors.BackendBusyError,
        ),
        (rexc.BusyLoadingError("Redis is loading the dataset"), ctxstore.errors.BackendBusyError),
        (rexc.ResponseError("LOADING Redis is loading"), ctxstore.errors.BackendBusyError),
        (rexc.ResponseError("OOM command not allowed"), ctxstore.errors.BackendBusyError),
        (rexc.ReadOnlyError("READONLY You can't write"), ctxstore.errors.BackendBusyError),
        (rexc.ResponseError("TRYAGAIN multiple keys"), ctxstore.errors.BackendBusyError),
        (rexc.ConnectionError("refused"), ctxstore.BackendUnavailableError),
        (rexc.TimeoutError("timed out"), ctxstore.errors.BackendTimeoutError),
        (TimeoutError("timed out"), ctxstore.errors.BackendTimeoutError),
        (rexc.ClusterDownError("CLUSTERDOWN"), ctxstore.BackendUnavailableError),
        (rexc.RedisClusterException("no nodes"), ctxstore.BackendUnavailableError),
        (ConnectionResetError("reset"), ctxstore.BackendUnavailableError),
        (rexc.MovedError("3999 127.0.0.1:7001"), ctxstore.errors.ConfigurationError),
        (rexc.NoPermissionError("NOPERM no access"), ctxstore.errors.BackendPermissionError),
        (rexc.ResponseError("ERR something else"), ctxstore.errors.BackendError),
    ],
)
def test_backend_errors(error: Exception, expected: type[Exception]) -> None:
    translated = failures.translate(error, {"chat_id": "c1"})
    assert type(translated) is expected
    assert translated.details["chat_id"] == "c1"


def test_a_timeout_says_the_write_may_have_been_applied_and_how_to_retry() -> None:
    translated = failures.translate(rexc.TimeoutError("Timeout reading from socket"))
    assert isinstance(translated, ctxstore.BackendUnavailableError)
    assert "may have been applied" in str(translated)
    assert "same request_id" in str(translated)
    refused = failures.translate(rexc.ConnectionError("Connection refused"))
    assert not isinstance(refused, ctxstore.errors.BackendTimeoutError)


@pytest.mark.parametrize(
    ("text", "command", "key"),
    [
        # Redis 7.0: the command refused is named, the key is not.
        (
            "NOPERM this user has no permissions to run the 'flushall' command",
            "flushall",
            None,
        ),
        ("NOPERM No permissions to access a key", "append", "ctx:t:{c1}:chat"),
        # Valkey and Redis 7.2 name the key.
        (
            "NOPERM User t has no permissions to access the 'ctx:u:{c1}:log' key",
            "append",
            "ctx:u:{c1}:log",
        ),
    ],
)
def test_an_acl_refusal_names_the_command_and_key(text: str, command: str, key: str | None) -> None:
    keys = (
        ("ctx:t:{c1}:chat",)
        if key is None or key.startswith("ctx:t")
        else (
            "ctx:u:{c1}:chat",
            "ctx:u:{c1}:log",
        )
    )
    translated = failures.translate(
        rexc.NoPermissionError(text), {"chat_id": "c1"}, command="append", keys=keys
    )
    assert type(translated) is ctxstore.errors.BackendPermissionError
    assert not isinstance(translated, (ctxstore.PermissionDeniedError, ctxstore.NotFoundError))
    assert translated.command == command
    assert translated.key == key
    assert command in str(translated)


@pytest.mark.parametrize(
    ("reply", "expected", "attributes"),
    [
        ('CTX_NOT_FOUND {"what":"chat"}', ctxstore.ChatNotFoundError, {}),
        ('CTX_NOT_FOUND {"what":"branch","id":"b"}', ctxstore.errors.BranchNotFoundError, {}),
        ('CTX_NOT_FOUND {"what":"message","id":"m"}', ctxstore.errors.MessageNotFoundError, {}),
        (
            'CTX_NOT_FOUND {"what":"checkpoint","id":"x"}',
            ctxstore.errors.CheckpointNotFoundError,
            {},
        ),
        (
            'CTX_CONFLICT {"reason":"head","branch":"main","expected":"","current":"m9"}',
            ctxstore.HeadConflictError,
            {"current_head": "m9", "expected_head": None, "branch": "main"},
        ),
        (
            'CTX_CONFLICT {"reason":"message_exists","id":"m"}',
            ctxstore.errors.MessageExistsError,
            {},
        ),
        (
            'CTX_CONFLICT {"reason":"branch_exists","branch":"b"}',
            ctxstore.errors.BranchExistsError,
            {},
        ),
        ('CTX_TAKEN {"what":"chat"}', ctxstore.ChatNotFoundError, {}),
        ('CTX_CORRUPT {"key":"k","field":"f","reason":"r"}', ctxstore.errors.CorruptionError, {}),
        ('CTX_LIMIT {"what":"chain depth","limit":5}', ctxstore.errors.LimitExceededError, {}),
        ('CTX_INVALID {"reason":"duplicate"}', ctxstore.ValidationError, {}),
        ("CTX_NEW not json", ctxstore.CtxStoreError, {}),
    ],
)
def test_script_errors(reply: str, expected: type[Exception], attributes: dict[str, Any]) -> None:
    translated = failures.translate(rexc.ResponseError(reply), {"chat_id": "c1"})
    assert type(translated) is expected
    for name, value in attributes.items():
        assert getattr(translated, name) == value
    assert translated.details["chat_id"] == "c1"


def test_a_batch_resends_only_the_scripts_the_server_did_not_know() -> None:
    script = load_script("get_chat")
    first = script_call(script, ("k1",), (), parse=lambda reply: ("first", reply))
    plain = command_call(("ZADD", "idx", "GT", 1, "c"), keys=("idx",))
    second = script_call(script, ("k2",), (), parse=lambda reply: ("second", reply))

    def operation() -> Operation[list[Any]]:
        outcomes: list[Any] = yield (first, plain, second)
        return outcomes

    exchange = Exchange(operation())
    assert [command[0] for command in exchange.request()] == ["EVALSHA", "ZADD", "EVALSHA"]
    exchange.respond([rexc.NoScriptError("NOSCRIPT"), 1, [b"f", b"v"]])
    assert not exchange.done
    assert [command[0] for command in exchange.request()] == ["EVAL"]
    assert exchange.request()[0][1] == script.source
    exchange.respond([[b"g", b"w"]])
    assert exchange.done
    assert exchange.result == [("first", [b"g", b"w"]), 1, ("second", [b"f", b"v"])]


def test_errors_reach_the_operation_as_exceptions() -> None:
    call = command_call(("GET", "k"), keys=("k",))

    def operation() -> Operation[str]:
        try:
            yield call
        except ctxstore.NotFoundError as error:
            return f"handled {type(error).__name__}"
        return "not reached"

    exchange = Exchange(operation())
    exchange.respond([rexc.ResponseError('CTX_NOT_FOUND {"what":"chat"}')])
    assert exchange.result == "handled ChatNotFoundError"
