"""deploy/acl.conf on a real redis-server: it loads, the default user is off, a tenant can run
every ctxstore operation in its namespace (through the library's functions, which an operator
loaded) and nothing else: not another tenant's keys, not FLUSHALL / KEYS / SCAN / CONFIG, and no
Lua of its own (no EVAL, SCRIPT, FUNCTION). An ACL refusal is a BackendPermissionError naming
the command and the key, never a chat-level error."""

from __future__ import annotations

import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import redis

import ctxstore
from tests.support import servers
from tests.support.streams import ModelStreams, consume, read_pieces

ACL_FILE = servers.ACL_FILE


@pytest.fixture(scope="module")
def acl_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[servers.RedisProcess]:
    """A server of deploy/acl.conf on which an operator loaded the library (as a deploy does
    with `ctxstore functions load`)."""
    with servers.acl_standalone(tmp_path_factory.mktemp("acl")) as server:
        yield server


@pytest.fixture
def bare_acl_server(tmp_path: Path) -> Iterator[servers.RedisProcess]:
    """A server of deploy/acl.conf without the library."""
    with servers.acl_standalone(tmp_path, library=False) as server:
        yield server


def tenant_url(server: servers.RedisProcess, user: str) -> str:
    return f"redis://{user}:change-me-{user}@127.0.0.1:{server.port}/0"


def test_the_file_has_no_comments_and_the_default_user_is_off(
    acl_server: servers.RedisProcess,
) -> None:
    assert not any(line.startswith("#") for line in ACL_FILE.read_text().splitlines())
    anonymous = redis.Redis(port=acl_server.port)
    with pytest.raises(redis.AuthenticationError):
        anonymous.ping()
    anonymous.close()


def test_a_tenant_runs_every_operation_in_its_namespace(acl_server: servers.RedisProcess) -> None:
    store = ctxstore.connect(
        tenant_url(acl_server, "acme"), namespace="acme", estimate_tokens=len
    ).admin()
    store.upsert_chat("c1", "alice", {"plan": "pro"})
    first = store.append(
        "c1",
        "main",
        [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}],
        expected_head=None,
        compaction=ctxstore.models.CompactionTrigger(soft_tokens=1),
    )
    assert first.compaction_job is not None
    store.update_chat("c1", title="Plans")
    store.add_usage("c1", {"input_tokens": 3, "output_tokens": 2})
    branch = store.create_branch("c1", first.message_ids[0], activate=False)
    store.upsert_checkpoint("c1", "cp", first.message_ids[0])
    store.branch_from_checkpoint("c1", "cp", activate=False)
    store.write_summary("c1", first.message_ids[0], "they said hi")
    assert store.load_branch("c1", after_summary=True).summary is not None
    assert store.load_branch("c1", max_tokens=100).messages
    assert store.branch_size("c1").messages == 2
    assert len(store.list_branches("c1")) == 3
    assert store.get_branch("c1", branch.name).name == branch.name
    assert [c.id for c in store.list_chats()] == ["c1"]
    assert store.list_chats_page(limit=1).chats
    assert store.get_graph("c1").messages
    assert store.expire_chat("c1", 3600) == 3600
    assert store.expire_chat("c1", None) is None
    assert store.verify_chat("c1", repair=True).ok
    assert store.import_chat(store.export_chat("c1"), chat_id="c1-copy").id == "c1-copy"
    engine = ctxstore.ContextEngine(store=store, chat_id="c2", user_id="alice")
    with engine.turn("enqueue", lease=5) as turn:
        engine.set(ctxstore.user("a question"))
        engine.save()
        turn.extend()
    assert engine.resolve().messages
    assert store.redact_message("c1", first.message_ids[0], reason="a test").redacted
    assert next(iter(store.export_user("alice")))["type"] == "chat"
    swept = store.sweep()
    assert "SCAN" in swept.skipped or "scan" in swept.skipped.lower()  # an operator's part
    assert store.delete_chat("c1")
    receipt = store.erase_user("alice")
    assert set(receipt.chat_ids) == {"c1-copy", "c2"}  # c1 was deleted: out of the record
    assert any("not known" in place for place in receipt.unreachable)  # no INFO for tenants
    assert store.for_user("alice").list_chats() == []
    store.close()


def test_a_tenant_streams_an_answer_and_reads_it_back(
    acl_server: servers.RedisProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A streamed turn (its stream's start trims, writes, ends) and a reader following it live
    in another thread (the read script, the blocking XREAD, active_stream), as the tenant."""
    store = ctxstore.connect(
        tenant_url(acl_server, "acme"), namespace="acme", estimate_tokens=len
    ).admin()
    ModelStreams().install(monkeypatch).delay = 0.01
    engine = ctxstore.ContextEngine(store=store, chat_id="streamed", user_id="alice")
    engine.set(ctxstore.user("Plan a day in Porto."))
    turn = engine.stream_turn("gpt-4o-mini", mock_response="Ribeira, then the Livraria Lello.")
    assert engine.active_stream() == turn.stream_id
    with ThreadPoolExecutor(1) as pool:
        following = pool.submit(read_pieces, store, "streamed", turn.stream_id)
        text = consume(turn, engine)
        pieces = following.result(timeout=30)
    assert "".join(piece.text for piece in pieces) == text == "Ribeira, then the Livraria Lello."
    assert len(pieces) > 1
    assert engine.active_stream() is None
    assert store.delete_chat("streamed")
    store.close()


@pytest.mark.parametrize(
    "command",
    [
        ["FLUSHALL"],
        ["FLUSHDB"],
        ["SWAPDB", "0", "1"],
        ["KEYS", "*"],
        ["SCAN", "0"],
        ["RANDOMKEY"],
        ["CONFIG", "GET", "*"],
        ["GET", "ctx:globex:{x}:chat"],
        # No Lua of its own: a script or a library could run for as long as it likes and
        # stall the server for every tenant.
        ["EVAL", "return 1", "1", "ctx:acme:{x}:chat"],
        ["EVALSHA", "e0e1f9fabfc9d4800c877a703b823ac0578ff8db", "1", "ctx:acme:{x}:chat"],
        ["EVAL_RO", "return 1", "1", "ctx:acme:{x}:chat"],
        ["SCRIPT", "LOAD", "return 1"],
        ["SCRIPT", "FLUSH"],
        ["FUNCTION", "LOAD", "#!lua name=mine\nredis.register_function('mine', function() end)"],
        ["FUNCTION", "DELETE", "ctxstore"],
        ["FUNCTION", "FLUSH"],
        ["FUNCTION", "RESTORE", "x"],
        ["FUNCTION", "LIST"],
    ],
)
def test_a_tenant_cannot_flush_list_or_read_others(
    acl_server: servers.RedisProcess, command: list[str]
) -> None:
    client = redis.Redis(port=acl_server.port, username="acme", password="change-me-acme")
    with pytest.raises(redis.exceptions.NoPermissionError):
        client.execute_command(*command)
    client.close()


def test_another_tenants_namespace_is_a_permission_error(
    acl_server: servers.RedisProcess,
) -> None:
    globex = ctxstore.connect(tenant_url(acl_server, "globex"), namespace="globex").admin()
    globex.upsert_chat("secret", "bob")
    intruder = ctxstore.connect(tenant_url(acl_server, "acme"), namespace="globex").admin()
    calls: list[tuple[str, Any]] = [
        ("get_chat", lambda: intruder.get_chat("secret", user_id="bob")),
        ("get_chain", lambda: intruder.load_branch("secret", user_id="bob")),
        (
            "append",
            lambda: intruder.append(
                "secret",
                "main",
                [{"role": "user", "content": "x"}],
                expected_head=None,
                user_id="bob",
            ),
        ),
        ("delete_chat", lambda: intruder.delete_chat("secret", user_id="bob")),
        ("read_index", lambda: intruder.list_chats(user_id="bob")),
    ]
    for command, call in calls:
        with pytest.raises(ctxstore.errors.BackendPermissionError) as caught:
            call()
        assert not isinstance(
            caught.value, (ctxstore.PermissionDeniedError, ctxstore.NotFoundError)
        )
        assert caught.value.command == command
        # Redis 7.0 does not say which key it refused: a call of one key names it, a script
        # of several the prefix they share.
        assert "ctx:globex:" in str(caught.value)
        assert caught.value.key is None or caught.value.key.startswith("ctx:globex:")
    assert globex.get_chat("secret").user_id == "bob"
    globex.close()
    intruder.close()


def test_a_tenant_runs_only_the_functions_of_a_library_an_operator_loaded(
    acl_server: servers.RedisProcess,
) -> None:
    """FCALL reaches the library's functions only (a function is code the operator loaded);
    every call went as a function: no script ran for the tenant."""
    client = redis.Redis(port=acl_server.port, username="admin", password="change-me-admin")
    before = client.info("commandstats")
    store = ctxstore.connect(tenant_url(acl_server, "acme"), namespace="acme", estimate_tokens=len)
    store.admin().upsert_chat("c-fn", "alice")
    store.admin().load_branch("c-fn", user_id="alice")
    assert store.state.lua.functions
    after = client.info("commandstats")
    assert after["cmdstat_fcall"]["calls"] > before.get("cmdstat_fcall", {"calls": 0})["calls"]
    for script in ("cmdstat_evalsha", "cmdstat_eval"):  # (refused ones are rejected_calls)
        assert after.get(script, {"calls": 0})["calls"] == 0
    store.close()
    client.close()


def test_a_tenant_without_the_library_is_told_to_have_it_loaded(
    bare_acl_server: servers.RedisProcess,
) -> None:
    """The tenant may neither load the library nor run scripts: a ConfigurationError that
    names `ctxstore functions load`, with nothing written; once an operator loaded it, the
    same store works."""
    store = ctxstore.connect(
        tenant_url(bare_acl_server, "acme"), namespace="acme", estimate_tokens=len
    ).admin()
    with pytest.raises(ctxstore.errors.ConfigurationError, match="ctxstore functions load"):
        store.upsert_chat("c1", "alice")
    operator = redis.Redis(port=bare_acl_server.port, username="admin", password="change-me-admin")
    assert operator.keys("ctx:acme:*") == []
    with ctxstore.connect(tenant_url(bare_acl_server, "admin")) as admin:
        assert admin.admin().load_functions().loaded == ("server",)
    assert store.upsert_chat("c1", "alice").user_id == "alice"
    assert store.state.lua.functions
    operator.close()
    store.close()


def test_a_tenant_may_wait_for_its_writes(acl_server: servers.RedisProcess) -> None:
    """durability="replica" sends WAIT: the tenant may (this server has no replica, so the
    write is applied and then not confirmed, instead of refused)."""
    store = ctxstore.connect(
        tenant_url(acl_server, "acme"),
        namespace="acme",
        durability="replica",
        durability_timeout=0.1,
    ).admin()
    with pytest.raises(ctxstore.errors.DurabilityError):
        store.upsert_chat("durable", "alice")
    assert store.get_chat("durable").user_id == "alice"
    store.close()


#: Scripts only an operator's Redis user runs (the sweep's and a purge's scan of a whole
#: server): a tenant may not list key names, its own or another's.
OPERATOR_SCRIPTS = {"scan_node"}


def test_a_tenant_may_run_every_command_the_scripts_call() -> None:
    """Read from the Lua itself: a command a script starts calling is a refusal on every
    tenant's server until acl.conf allows it (the operations test only finds the paths it
    takes)."""
    lua = Path(__file__).resolve().parents[2] / "lua"
    called = set()
    for path in [*lua.glob("*.lua"), *lua.glob("lib/*.lua")]:
        if path.stem in OPERATOR_SCRIPTS:
            continue
        called |= {name.lower() for name in re.findall(r"redis\.call\('(\w+)'", path.read_text())}
    assert called, "no redis.call found: the pattern no longer matches the scripts"
    for line in ACL_FILE.read_text().splitlines():
        fields = line.split()
        if fields[:2] in (["user", "acme"], ["user", "globex"]):
            allowed = {field[1:].lower() for field in fields if field.startswith("+")}
            assert called <= allowed, f"{fields[1]} may not run {sorted(called - allowed)}"
            assert {"fcall", "fcall_ro"} <= allowed
            lua_of_its_own = {name for name in allowed if name.split("|")[0] in LUA_COMMANDS}
            assert not lua_of_its_own, f"{fields[1]} may run Lua of its own: {lua_of_its_own}"
            assert not any(field.startswith("+@") for field in fields[2:]), fields[1]


#: Commands that run (or load) Lua a client sends: no tenant may have them.
LUA_COMMANDS = {"eval", "evalsha", "eval_ro", "evalsha_ro", "script", "function"}
