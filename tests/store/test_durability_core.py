"""``durability=`` without a server: where the exchange puts the waits, how it judges their
replies, and which settings ``connect`` refuses before anything is sent."""

from __future__ import annotations

from typing import Any

import fakeredis
import pytest
import redis
from redis.exceptions import NoScriptError, ResponseError

import ctxstore
from ctxstore._core.durability import Durability, durability_of
from ctxstore._core.protocol import Call, Exchange, Operation, command_call, script_call
from ctxstore._core.scripts import load_script
from ctxstore.settings import Settings

REPLICA = Durability("replica", 250)
AOF = Durability("aof", 250)


def write_then_read(log: list[str]) -> Operation[str]:
    """A write, then a read in its own step; records what the operation got to see."""
    written = yield command_call(("SET", "k", "v"), keys=("k",), writes=True)
    log.append(f"written {written}")
    value = yield command_call(("GET", "k"), keys=("k",))
    log.append(f"read {value}")
    return f"done {value}"


def test_a_write_is_followed_by_the_wait_in_the_same_request_and_a_read_is_not() -> None:
    exchange = Exchange(write_then_read([]), REPLICA)
    assert exchange.request() == [("SET", "k", "v"), ("WAIT", 1, 250)]
    exchange.respond([b"OK", 1])
    assert exchange.request() == [("GET", "k")]
    exchange.respond([b"v"])
    assert exchange.result == "done b'v'"


def test_without_durability_nothing_waits() -> None:
    exchange = Exchange(write_then_read([]))
    assert exchange.request() == [("SET", "k", "v")]


def test_aof_waits_for_the_local_fsync_and_reads_its_pair_reply() -> None:
    exchange = Exchange(write_then_read([]), AOF)
    assert exchange.request() == [("SET", "k", "v"), ("WAITAOF", 1, 0, 250)]
    exchange.respond([b"OK", [1, 0]])
    exchange.respond([b"v"])
    assert exchange.result == "done b'v'"

    short = Exchange(write_then_read([]), AOF)
    short.respond([b"OK", [0, 1]])  # a replica has it, the primary's own file does not
    short.respond([b"v"])
    with pytest.raises(ctxstore.errors.DurabilityError, match="fsync"):
        short.result  # noqa: B018


def test_a_wait_that_falls_short_lets_the_operation_finish_then_raises_with_its_result() -> None:
    log: list[str] = []
    exchange = Exchange(write_then_read(log), REPLICA)
    exchange.respond([b"OK", 0])
    exchange.respond([b"v"])  # the later steps still run: the write exists on the primary
    assert exchange.done
    assert log == ["written b'OK'", "read b'v'"]
    with pytest.raises(ctxstore.errors.DurabilityError) as raised:
        exchange.result  # noqa: B018
    error = raised.value
    assert isinstance(error, ctxstore.errors.BackendError)
    assert error.result == "done b'v'"
    assert "applied on the primary" in str(error)
    assert "may or may not survive a failover" in str(error)
    assert "may exist" in str(error)


def test_a_wait_that_fails_is_a_durability_error_caused_by_it() -> None:
    exchange = Exchange(write_then_read([]), REPLICA)
    refusal = ResponseError("WAIT cannot be used with replica instances")
    exchange.respond([b"OK", refusal])
    exchange.respond([b"v"])
    with pytest.raises(ctxstore.errors.DurabilityError) as raised:
        exchange.result  # noqa: B018
    assert raised.value.__cause__ is refusal


def test_a_refused_write_wrote_nothing_so_its_wait_is_not_judged() -> None:
    log: list[str] = []

    def refused() -> Operation[str]:
        try:
            yield command_call(("SET", "k", "v"), keys=("k",), writes=True)
        except ctxstore.errors.BackendError as error:
            log.append(type(error).__name__)
        return "handled"

    exchange = Exchange(refused(), REPLICA)
    exchange.respond([ResponseError("WRONGTYPE"), 0])
    assert log == ["BackendError"]
    assert exchange.result == "handled"


def test_a_call_that_says_it_did_not_write_is_not_judged() -> None:
    def creation(created: bool) -> Operation[Any]:
        """Like opening a chat: whether it wrote is known from the reply only."""
        reply = yield Call(None, ("k",), ("SET", "k", "v"), writes=lambda _reply: created)
        return reply

    existing = Exchange(creation(False), REPLICA)
    assert existing.request() == [("SET", "k", "v"), ("WAIT", 1, 250)]  # sent all the same
    existing.respond([b"OK", 0])
    assert existing.result == b"OK"

    created = Exchange(creation(True), REPLICA)
    created.respond([b"OK", 0])
    with pytest.raises(ctxstore.errors.DurabilityError):
        created.result  # noqa: B018


def test_a_script_resent_after_noscript_is_waited_for_again() -> None:
    script = load_script("delete_checkpoint")
    keys = tuple(f"k{i}" for i in range(script.required_keys))

    def operation() -> Operation[bool]:
        deleted: bool = yield script_call(
            script, keys, ("", "", "cp"), parse=bool, writes=lambda deleted: deleted
        )
        return deleted

    exchange = Exchange(operation(), REPLICA)
    first = exchange.request()
    assert [command[0] for command in first] == ["EVALSHA", "WAIT"]
    exchange.respond([NoScriptError("NOSCRIPT No matching script"), 1])
    again = exchange.request()
    assert [command[0] for command in again] == ["EVAL", "WAIT"]
    exchange.respond([1, 0])
    with pytest.raises(ctxstore.errors.DurabilityError) as raised:
        exchange.result  # noqa: B018
    assert raised.value.result is True


# --- the setting ---------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["sync", "REPLICA", "", 1, True])
def test_an_unknown_durability_is_refused(mode: object) -> None:
    with pytest.raises(ctxstore.errors.ConfigurationError, match="durability must be"):
        ctxstore.connect("redis://127.0.0.1:1", durability=mode)  # type: ignore[arg-type]


@pytest.mark.parametrize("timeout", [0, -1, 0.0, float("nan"), float("inf"), True, "1", None])
def test_a_bad_durability_timeout_is_refused(timeout: object) -> None:
    with pytest.raises(ctxstore.errors.ConfigurationError, match="durability_timeout"):
        ctxstore.connect(
            "redis://127.0.0.1:1",
            durability="replica",
            durability_timeout=timeout,  # type: ignore[arg-type]
        )


def test_the_wait_must_end_before_the_socket_times_out() -> None:
    with pytest.raises(ctxstore.errors.ConfigurationError, match="shorter than socket_timeout"):
        ctxstore.connect("redis://127.0.0.1:1", durability="replica", durability_timeout=5.0)
    with pytest.raises(ctxstore.errors.ConfigurationError, match="shorter than socket_timeout"):
        ctxstore.connect_async(
            "redis://127.0.0.1:1",
            durability="aof",
            durability_timeout=2,
            redis_options={"socket_timeout": 2},
        )
    client = redis.Redis(port=1, socket_timeout=0.5)
    with pytest.raises(ctxstore.errors.ConfigurationError, match=r"socket_timeout \(0.5 s\)"):
        ctxstore.connect(client, durability="replica")
    client.close()
    longer = ctxstore.connect(
        "redis://127.0.0.1:1",
        durability="replica",
        durability_timeout=5.0,
        redis_options={"socket_timeout": 6},
    )
    assert longer.state.durability == Durability("replica", 5000)
    unbounded = ctxstore.connect(
        "redis://127.0.0.1:1",
        durability="replica",
        durability_timeout=30,
        redis_options={"socket_timeout": None},
    )
    assert unbounded.state.durability == Durability("replica", 30_000)
    longer.close()
    unbounded.close()


def test_the_default_is_no_durability_and_one_second() -> None:
    plain = ctxstore.connect("redis://127.0.0.1:1")
    assert plain.state.durability is None
    assert not plain.state.check_durability
    durable = ctxstore.connect("redis://127.0.0.1:1", durability="replica")
    assert durable.state.durability == Durability("replica", 1000)
    assert durable.state.check_durability  # checked at the first operation
    plain.close()
    durable.close()
    tiny = Settings(durability="aof", durability_timeout=0.0004)
    assert durability_of(tiny, None) == Durability("aof", 1)


def test_the_embedded_store_refuses_durability() -> None:
    for mode in ("replica", "aof"):
        with pytest.raises(ctxstore.errors.ConfigurationError, match="memory://"):
            ctxstore.connect("memory://", durability=mode)  # type: ignore[arg-type]
        with pytest.raises(ctxstore.errors.ConfigurationError, match="memory://"):
            ctxstore.connect_async("memory://shared-name", durability=mode)  # type: ignore[arg-type]
    with pytest.raises(ctxstore.errors.ConfigurationError, match="memory://"):
        ctxstore.connect(fakeredis.FakeRedis(), durability="replica")
    assert ctxstore.connect("memory://", durability=None).state.durability is None
