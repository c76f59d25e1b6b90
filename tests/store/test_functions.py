"""The Redis Functions library: one library per release, loaded where a call finds it missing
(on that node, the call applied once), reads called with FCALL_RO, and the EVALSHA scripts
where a server has no functions (decided once per server, logged), or where a setting says so.

Every test names its ``scripting`` mode: the suite runs once more with
``CTXSTORE_SCRIPTING=scripts``, and these tests are about the functions either way.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fakeredis
import pytest
import redis

import ctxstore
from ctxstore._core import protocol
from ctxstore._core.scripts import (
    LIBRARY_FOLDER,
    READ_COMMANDS,
    declares_no_writes,
    entry_script_names,
    library_blocks,
    library_code,
    load_library,
    load_script,
    read_library,
    reads_only,
    script_dir,
    script_reads_only,
)
from ctxstore.errors import ConfigurationError
from tests.support import servers
from tests.support.facade import LoopThread, SyncOverAsync
from tests.support.keyspace import raw_client
from tests.support.wire import trace_wire

USER = {"role": "user", "content": "hello"}


def library_names(client: Any) -> list[bytes]:
    """The ctxstore libraries ``client``'s node holds."""
    return [entry[1] for entry in client.function_list("ctxstore_*")]


def primaries(url: str) -> list[Any]:
    """A client of each primary of ``url``'s server (one for a single server, or the
    embedded store)."""
    if url.startswith("memory://"):
        return [ctxstore.connect(url).client]  # a client of the same named store
    client = raw_client(url)
    if isinstance(client, redis.RedisCluster):
        nodes = [redis.Redis(host=n.host, port=n.port) for n in client.get_primaries()]
        client.close()
        return nodes
    return [client]


def node_of(url: str, nodes: list[Any], key: str) -> Any:
    """The one of ``nodes`` (:func:`primaries`) that serves ``key``."""
    client = raw_client(url)
    if not isinstance(client, redis.RedisCluster):
        return nodes[0]
    port = client.get_node_from_key(key).port
    client.close()
    return next(node for node in nodes if node.connection_pool.connection_kwargs["port"] == port)


def open_store(
    url: str, namespace: str, shell: str, loop_thread: LoopThread, **options: Any
) -> Any:
    if shell == "sync":
        return ctxstore.connect(
            url, namespace=namespace, estimate_tokens=len, encryption=None, **options
        ).admin()
    opened = ctxstore.connect_async(
        url, namespace=namespace, estimate_tokens=len, encryption=None, **options
    )
    return SyncOverAsync(opened.admin(), loop_thread)


# --- the library --------------------------------------------------------------------------------


def test_the_library_is_named_after_its_format_and_code_and_holds_every_operation() -> None:
    library = load_library()
    assert re.fullmatch(r"ctxstore_2_[0-9a-f]{16}", library.name)
    assert library.code.startswith(f"#!lua name={library.name}\n")
    assert set(library.functions) == {f"{library.name}_{name}" for name in entry_script_names()}
    for name in entry_script_names():
        assert load_script(name).function == f"{library.name}_{name}"


def test_reads_are_registered_no_writes_and_the_writes_are_not() -> None:
    client = fakeredis.FakeRedis()
    client.function_load(load_library().code)
    (entry,) = client.function_list("ctxstore_*")
    fields = dict(zip(entry[::2], entry[1::2], strict=True))
    flags = {
        function[1].decode(): set(function[5])
        for function in fields[b"functions"]  # [name, n, description, d, flags, f]
    }
    for name in entry_script_names():
        script = load_script(name)
        assert (b"no-writes" in flags[script.function]) is script.read_only, name
    assert load_script("get_chain").read_only
    assert load_script("read_index").read_only  # ZREVRANK only
    assert not load_script("append").read_only
    blocks = tuple(library_blocks(read_library(script_dir() / LIBRARY_FOLDER)))
    for name in entry_script_names():  # each header's declaration is what the script calls
        body = (script_dir() / f"{name}.lua").read_text()
        assert declares_no_writes(body) is script_reads_only(blocks, body), name
    assert not reads_only("redis.call(command, key)")  # a command named by a variable
    assert not reads_only("redis.call('GET', k) redis.call('SET', k, v)")
    assert {"GET", "HMGET", "LRANGE"} <= READ_COMMANDS


def test_a_read_goes_as_fcall_ro_and_a_write_as_fcall(namespace: str) -> None:
    store = ctxstore.connect(
        "memory://", namespace=namespace, scripting="functions", encryption=None
    ).admin()
    store.upsert_chat("c1", "alice")
    with trace_wire() as write:
        result = store.append("c1", "main", [USER], expected_head=None)
    with trace_wire() as read:
        store.get_chain("c1", result.head_message_id)
    assert (write.round_trips, write.commands) == (1, ["FCALL"])
    assert (read.round_trips, read.commands) == (1, ["FCALL_RO"])
    store.close()


def test_a_library_function_is_checked_for_its_declared_keys() -> None:
    """The declared-keys check of the managed services holds inside functions too."""
    body = "-- KEYS[1] chat\nreturn run(function() return redis.call('GET', 'another key') end)"
    blocks = library_blocks(read_library(script_dir() / LIBRARY_FOLDER))
    library = library_code(blocks, (("sneaky", body),), checking=True)
    client = fakeredis.FakeRedis()
    client.function_load(library.code)
    with pytest.raises(redis.ResponseError, match="CTX_UNDECLARED"):
        client.fcall(f"{library.name}_sneaky", 1, "chat")
    with pytest.raises(redis.ResponseError, match="a script with no KEYS"):
        client.fcall(f"{library.name}_sneaky", 0)


# --- loading where missing -----------------------------------------------------------------------


@pytest.mark.parametrize("shell", ["sync", "async"])
def test_a_call_that_finds_the_library_missing_loads_it_and_is_applied_once(
    backend: str, namespace: str, shell: str, loop_thread: LoopThread
) -> None:
    """FUNCTION FLUSH on every primary (a new server), then on one primary between calls
    (a failover to a replica that never got the library): each call that finds its function
    missing loads the library on its node and is sent again, applied once."""
    store = open_store(backend, namespace, shell, loop_thread, scripting="auto")
    nodes = primaries(backend)
    for node in nodes:
        node.function_flush()
    store.upsert_chat("c1", "alice")
    head = store.append("c1", "main", [USER], expected_head=None).head_message_id
    chat_node = node_of(backend, nodes, store.state.keyspace.chat("c1").key("chat"))
    chat_node.function_flush()
    with trace_wire() as wire:
        result = store.append("c1", "main", [USER], expected_head=head)
    if "cluster" not in backend:  # (a Cluster's pipeline is a send to each node)
        assert wire.round_trips == 2  # the call, then the load and the call again
    # One load per call that found its function missing (on a Cluster an index touch may
    # share the chat's node), each right before its call.
    loads = [i for i, name in enumerate(wire.commands) if name == "FUNCTION"]
    assert 1 <= len(loads) <= 3
    assert all(wire.commands[i + 1] == "FCALL" for i in loads)
    assert [m["id"] for m in store.get_chain("c1", result.head_message_id)] == [
        head,
        result.head_message_id,
    ]
    assert load_library().name.encode() in library_names(chat_node)
    assert store.state.lua.functions
    store.close()


def test_a_second_store_of_the_server_sends_no_load(redis_server: Any, namespace: str) -> None:
    first = ctxstore.connect(redis_server.url, namespace=namespace, scripting="auto").admin()
    first.upsert_chat("c1", "alice")
    second = ctxstore.connect(redis_server.url, namespace=namespace, scripting="auto").admin()
    assert second.state.lua is first.state.lua  # decided once per server
    with trace_wire() as wire:
        second.get_chat("c1")
    assert wire.round_trips == 1
    assert "FUNCTION" not in wire.commands
    first.close()
    second.close()


def test_load_functions_loads_on_every_primary_and_lists_what_each_holds(
    server_backend: str, namespace: str
) -> None:
    nodes = primaries(server_backend)
    for node in nodes:
        node.function_flush()
    store = ctxstore.connect(server_backend, namespace=namespace).admin()
    first = store.load_functions()
    assert len(first.loaded) == len(nodes)
    assert first.present == ()
    again = store.load_functions()
    assert (again.loaded, len(again.present)) == ((), len(nodes))
    assert all(names == (load_library().name,) for names in again.libraries.values())
    for node in nodes:
        assert library_names(node) == [load_library().name.encode()]
    store.close()


def test_load_functions_is_an_operators_call(namespace: str) -> None:
    store = ctxstore.connect("memory://", namespace=namespace)
    with pytest.raises(ctxstore.errors.ScopeError):
        store.load_functions()
    assert store.admin().load_functions().loaded == ("server",)
    store.close()


# --- servers without functions ------------------------------------------------------------------


@pytest.fixture
def no_functions_server(tmp_path: Path) -> Iterator[servers.RedisProcess]:
    """A Redis 7 that refuses FCALL and FUNCTION as unknown commands (as Redis 6 does)."""
    with servers.standalone(
        tmp_path,
        "--rename-command", "FCALL", "",
        "--rename-command", "FCALL_RO", "",
        "--rename-command", "FUNCTION", "",
    ) as server:  # fmt: skip
        yield server


def test_a_server_without_functions_gets_scripts_decided_once_and_logged(
    no_functions_server: servers.RedisProcess, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    url = no_functions_server.url
    with caplog.at_level(logging.INFO, logger="ctxstore"):
        store = ctxstore.connect(url, namespace=namespace, scripting="auto").admin()
        with trace_wire() as first:
            store.upsert_chat("c1", "alice")
        head = store.append("c1", "main", [USER], expected_head=None).head_message_id
        with trace_wire() as later:
            store.append("c1", "main", [USER], expected_head=head)
        again = ctxstore.connect(url, namespace=namespace, scripting="auto").admin()
        assert again.state.lua is store.state.lua
        again.get_chat("c1")
    assert first.commands.index("FCALL") < first.commands.index("EVALSHA")  # it found out
    assert later.commands == ["EVALSHA"]
    assert not store.state.lua.functions
    fallbacks = [r for r in caplog.records if "uses EVALSHA scripts" in r.getMessage()]
    assert len(fallbacks) == 1
    assert "FCALL" in fallbacks[0].getMessage()
    assert fallbacks[0].levelno == logging.INFO  # a server without functions: nothing wrong
    assert len(store.load_branch("c1").messages) == 2
    store.close()
    again.close()


def test_an_embedded_store_of_redis_6_gets_scripts(namespace: str) -> None:
    client = fakeredis.FakeRedis(server=fakeredis.FakeServer(version=(6, 2)))
    store = ctxstore.connect(client, namespace=namespace, scripting="auto").admin()
    store.upsert_chat("c1", "alice")
    assert not store.state.lua.functions
    with trace_wire() as wire:
        store.get_chat("c1")
    assert wire.commands == ["EVALSHA", "EVAL"]  # (the script was not cached yet)


def test_scripting_functions_never_falls_back(
    no_functions_server: servers.RedisProcess, namespace: str
) -> None:
    store = ctxstore.connect(
        no_functions_server.url, namespace=namespace, scripting="functions"
    ).admin()
    with pytest.raises(ConfigurationError, match="scripting='functions'"):
        store.upsert_chat("c1", "alice")
    assert raw_client(no_functions_server.url).keys("*") == []  # nothing written
    store.close()


def test_scripting_scripts_never_sends_a_function(namespace: str) -> None:
    store = ctxstore.connect("memory://", namespace=namespace, scripting="scripts").admin()
    with trace_wire() as wire:
        store.upsert_chat("c1", "alice")
        store.get_chat("c1")
    assert "EVALSHA" in wire.commands
    assert not {"FCALL", "FCALL_RO", "FUNCTION"} & set(wire.commands)
    store.close()


def test_a_scripting_typo_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigurationError, match="scripting must be one of"):
        ctxstore.connect("memory://", scripting="function")
    monkeypatch.setenv("CTXSTORE_SCRIPTING", "lua")
    with pytest.raises(ConfigurationError, match="CTXSTORE_SCRIPTING must be one of"):
        ctxstore.connect("memory://")


def test_the_exchange_moves_a_call_only_forward() -> None:
    """FCALL, then load and FCALL, then EVALSHA, then EVAL: never back, at most four sends."""
    from ctxstore._core.dispatch import LuaDispatch

    script = load_script("get_chat")
    call = protocol.script_call(script, ("k",), (), parse=lambda reply: reply)

    def operation() -> protocol.Operation[Any]:
        return (yield call)

    lua = LuaDispatch("auto")
    exchange = protocol.Exchange(operation(), lua=lua)
    assert [c[0] for c in exchange.request()] == ["FCALL_RO"]
    exchange.respond([redis.ResponseError("ERR Function not found")])
    assert [c[:2] for c in exchange.request()] == [
        ("FUNCTION", "LOAD"),
        ("FCALL_RO", script.function),
    ]
    exchange.respond(
        [
            redis.exceptions.NoPermissionError(
                "this user has no permissions to run the 'function|load' command"
            ),
            redis.ResponseError("ERR Function not found"),
        ]
    )
    assert lua.functions  # not decided yet: only a script that ran decides
    assert [c[0] for c in exchange.request()] == ["EVALSHA"]
    exchange.respond([redis.exceptions.NoScriptError("NOSCRIPT No matching script")])
    assert [c[0] for c in exchange.request()] == ["EVAL"]
    exchange.respond([[b"ok"]])
    assert exchange.done
    assert exchange.result == [b"ok"]
    assert not lua.functions  # decided: scripts from now on


def one_call_exchange(lua: Any) -> protocol.Exchange[Any]:
    call = protocol.script_call(load_script("get_chat"), ("k",), (), parse=lambda reply: reply)

    def operation() -> protocol.Operation[Any]:
        return (yield call)

    return protocol.Exchange(operation(), lua=lua)


@pytest.mark.parametrize(
    "chosen",
    ["function not found", "Function not found", "function disabled", "unknown command 'fcall'"],
)
def test_a_domain_error_is_never_taken_for_a_server_without_functions(chosen: str) -> None:
    """A script's own error echoes names a caller chose: it is the call's outcome, nothing
    more (no load, no fallback)."""
    from ctxstore._core.dispatch import LuaDispatch

    lua = LuaDispatch("auto")
    exchange = one_call_exchange(lua)
    exchange.request()
    reply = f'CTX_NOT_FOUND {{"what": "checkpoint", "id": "{chosen}"}}'
    with pytest.raises(ctxstore.errors.NotFoundError):
        exchange.respond([redis.ResponseError(reply)])  # the operation's error, raised
    assert lua.functions


def test_a_load_that_fails_for_a_busy_or_full_server_is_the_calls_outcome() -> None:
    """Out of memory, read-only, loading: the server has functions, it cannot load now; the
    call fails with that, and the store keeps calling functions."""
    from ctxstore._core.dispatch import LuaDispatch

    lua = LuaDispatch("auto")
    exchange = one_call_exchange(lua)
    exchange.request()
    exchange.respond([redis.ResponseError("Function not found")])
    exchange.request()
    full = redis.exceptions.OutOfMemoryError("command not allowed when used memory > 'maxmemory'.")
    with pytest.raises(ctxstore.errors.BackendError, match="maxmemory"):
        exchange.respond([full, redis.ResponseError("Function not found")])
    assert lua.functions


def test_a_tenant_that_can_run_neither_changes_nothing_for_the_next_call(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """FCALL finds the library missing, the load and the script are refused: a
    ConfigurationError, every time, and the store goes on trying the functions (no flip,
    nothing logged)."""
    from ctxstore._core.dispatch import LuaDispatch

    lua = LuaDispatch("auto")
    refused_load = redis.exceptions.NoPermissionError(
        "this user has no permissions to run the 'function|load' command"
    )
    refused_script = redis.exceptions.NoPermissionError(
        "this user has no permissions to run the 'evalsha' command"
    )
    with caplog.at_level(logging.INFO, logger="ctxstore"):
        for _attempt in range(3):
            exchange = one_call_exchange(lua)
            assert [c[0] for c in exchange.request()] == ["FCALL_RO"]
            exchange.respond([redis.ResponseError("Function not found")])
            exchange.request()
            exchange.respond([refused_load, redis.ResponseError("Function not found")])
            assert [c[0] for c in exchange.request()] == ["EVALSHA"]
            with pytest.raises(ConfigurationError, match="ctxstore functions load"):
                exchange.respond([refused_script])
            assert lua.functions
    assert not caplog.records
