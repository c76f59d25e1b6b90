"""The Lua scripts: their header contracts, and callers passing exactly the declared keys."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

import ctxstore
from ctxstore._core import protocol
from ctxstore._core.keys import CHAT_KEY_NAMES
from ctxstore._core.ops import jobs, leases, reads, scanning, turns
from ctxstore._core.ops import streams as answer_stream
from ctxstore._core.ops.graph_window import graph_window
from ctxstore._core.scripts import (
    LIBRARY,
    LIBRARY_FOLDER,
    definition_blocks,
    entry_script_names,
    header_fields,
    library_blocks,
    load_library,
    load_script,
    needed_library,
    read_library,
    script_dir,
)
from ctxstore.crypto import LocalKeyProvider
from ctxstore.integrations.langgraph.layout import KEY_NAMES as THREAD_KEY_NAMES

SCRIPTS = entry_script_names()
LIBRARY_DIR = script_dir() / LIBRARY_FOLDER


def test_every_operation_has_its_script() -> None:
    assert {
        "append",
        "get_chain",
        "open_chat",
        "get_chat",
        "update_chat",
        "add_usage",
        "delete_chat",
        "get_message",
        "create_branch",
        "get_branch",
        "list_branches",
        "set_active_branch",
        "upsert_checkpoint",
        "get_checkpoint",
        "list_checkpoints",
        "delete_checkpoint",
        "get_graph",
        "repair_chat",
        "repair_index",
    } <= set(SCRIPTS)


@pytest.mark.parametrize("name", SCRIPTS)
def test_header_names_every_key_and_argument_and_the_reply(name: str) -> None:
    text = (script_dir() / f"{name}.lua").read_text()
    header = text.split("\n\n", 1)[0]
    assert header.startswith(f"-- {name}.lua: ")
    assert "-- Reply:" in header
    script = load_script(name)
    assert script.key_names, "every script touches at least one key"
    body = text[len(header) :]
    used = {int(n) for n in re.findall(r"KEYS\[(\d+)\]", body)}
    assert used == set(range(1, len(script.key_names) + 1)), (
        f"{name} uses KEYS {sorted(used)} but declares {script.key_names}"
    )
    used_args = {int(n) for n in re.findall(r"ARGV\[(\d+)\]", body)}
    declared_args = {int(n) for n in re.findall(r"^-- ARGV\[(\d+)", header, re.MULTILINE)}
    assert used_args <= declared_args | {max(declared_args, default=0) + 1}, name


@pytest.mark.parametrize(
    "path", [*(f"{name}.lua" for name in SCRIPTS), *(f"lib/{name}.lua" for name in LIBRARY)]
)
def test_scripts_run_on_the_embedded_lua(path: str) -> None:
    """fakeredis Lua has cjson but no cmsgpack, bit or struct, and rejects shebang lines."""
    text = (script_dir() / path).read_text()
    assert not text.startswith("#!")
    for library in ("cmsgpack", "bit.", "struct."):
        assert library not in text


def test_the_library_order_lists_every_library_file_once() -> None:
    """A file the order leaves out would never be read; one it lists must exist."""
    assert len(set(LIBRARY)) == len(LIBRARY)
    assert {path.stem for path in LIBRARY_DIR.glob("*.lua")} == set(LIBRARY)
    assert not set(LIBRARY) & set(SCRIPTS), "a library file is not an entry script"


def test_a_library_folder_with_a_file_too_many_or_too_few_is_refused(tmp_path: Path) -> None:
    for name in LIBRARY:
        (tmp_path / f"{name}.lua").write_text((LIBRARY_DIR / f"{name}.lua").read_text())
    assert [name for name, _ in read_library(tmp_path)] == list(LIBRARY)
    (tmp_path / "extra.lua").write_text("local function extra()\nend\n")
    with pytest.raises(ValueError, match=r"not listed \['extra'\]"):
        read_library(tmp_path)
    (tmp_path / "extra.lua").unlink()
    (tmp_path / f"{LIBRARY[-1]}.lua").unlink()
    with pytest.raises(ValueError, match=rf"missing \['{LIBRARY[-1]}'\]"):
        read_library(tmp_path)


def test_a_name_defined_in_two_library_files_is_refused() -> None:
    first = "-- one.lua: a header\n\nlocal LIMIT = 1\n\nlocal function twice()\n  return 1\nend\n"
    second = "-- two.lua: another\n\n-- the same name again\nlocal twice = 2\n"
    with pytest.raises(ValueError, match=r"lib/two\.lua defines twice, already defined in lib/one"):
        library_blocks([("one", first), ("two", second)])
    with pytest.raises(ValueError, match="twice"):
        library_blocks([("one", first + "\nlocal function twice()\nend\n")])


def test_a_script_carries_only_the_definitions_it_uses_in_library_order() -> None:
    blocks = library_blocks(
        [
            (
                "one",
                "-- one.lua: header\n\nlocal A = 1\n\n-- uses A\nlocal function f()\n"
                "  return A\nend\n\nlocal function unused()\nend\n",
            ),
            ("two", "-- two.lua: header\n\n-- uses f\nlocal function g()\n  return f()\nend\n"),
        ]
    )
    assert [name for name, _ in blocks] == ["A", "f", "unused", "g"]
    assert needed_library(blocks, "return g()") == (
        "local A = 1\n\nlocal function f()\n  return A\nend\n\n"
        "local function g()\n  return f()\nend\n"
    )
    assert needed_library(blocks, "return 1") == ""
    assert "local function open_chat" in load_script("get_chat").source
    assert "local function window_size" not in load_script("get_chat").source


def library_uses() -> dict[str, tuple[str, set[str]]]:
    """Every library definition: the file defining it and the library names its code uses
    (comments left out: a name mentioned in a comment is not a use)."""
    blocks = {
        name: (file_name, text)
        for file_name, file_text in read_library(LIBRARY_DIR)
        for name, text in definition_blocks(file_text)
    }
    return {
        name: (file_name, set(re.findall(r"\w+", re.sub(r"--[^\n]*", "", text))) & blocks.keys())
        for name, (file_name, text) in blocks.items()
    }


def test_every_library_definition_uses_only_earlier_ones() -> None:
    """A Lua local exists only after its definition: a use of a later one would be a nil global."""
    order = [name for name, _ in library_blocks(read_library(LIBRARY_DIR))]
    for name, (file_name, used) in library_uses().items():
        later = {other for other in used if order.index(other) > order.index(name)}
        assert not later, f"lib/{file_name}.lua: {name} uses {sorted(later)}, defined after it"


@pytest.mark.parametrize("file_name", LIBRARY)
def test_library_headers_say_what_a_file_holds_and_the_files_it_relies_on(file_name: str) -> None:
    text = (LIBRARY_DIR / f"{file_name}.lua").read_text()
    header = text.split("\n\n", 1)[0]
    assert header.startswith(f"-- {file_name}.lua: ")
    relies = re.search(r"^-- Relies on: (.+?)\.?$", header, re.MULTILINE)
    assert relies, f"lib/{file_name}.lua: the header names the files it relies on"
    named = set() if relies.group(1).startswith("nothing") else set(relies.group(1).split(", "))
    uses = library_uses()
    relied_on = {
        uses[other][0]
        for _, (defining_file, used) in uses.items()
        if defining_file == file_name
        for other in used
    } - {file_name}
    assert named == relied_on, f"lib/{file_name}.lua relies on {sorted(relied_on)}"
    assert all(LIBRARY.index(other) < LIBRARY.index(file_name) for other in relied_on)


@pytest.fixture
def recorded_calls(monkeypatch: pytest.MonkeyPatch) -> list[protocol.Call[Any]]:
    calls: list[protocol.Call[Any]] = []
    original = protocol.Call.wire

    def wire(self: protocol.Call[Any], form: int = protocol.EVALSHA) -> Any:
        calls.append(self)
        return original(self, form)

    monkeypatch.setattr(protocol.Call, "wire", wire)
    return calls


def _one(call: protocol.Call[Any]) -> protocol.Operation[Any]:
    result = yield call
    return result


def exercise_every_operation(store: ctxstore.Store) -> None:
    store.upsert_chat("c1", "alice", {"a": 1})
    store.get_chat("c1")
    store.update_chat("c1", title="t")
    store.state.cluster = True  # the index touches sent beside a write on a Redis Cluster
    store.update_chat("c1", title="t2")
    store.state.cluster = False
    store.add_usage("c1", {"input_tokens": 1})
    first = store.append("c1", "main", [{"role": "user", "content": "a"}] * 2, expected_head=None)
    store.get_message("c1", first.head_message_id)
    store.message_versions("c1", first.head_message_id)
    store.run(reads.read_branch(store.state, "c1", versions=True))
    store.get_chain("c1", first.head_message_id)
    store.load_branch("c1")
    store.create_branch("c1", first.head_message_id)
    store.get_branch("c1", "main")
    store.list_branches("c1")
    store.set_active_branch("c1", "main")
    store.upsert_checkpoint("c1", "cp", first.head_message_id)
    store.branch_from_checkpoint("c1", "cp")
    store.open_chat("c1", "alice", load=True)
    store.get_checkpoint("c1", "cp")
    store.list_checkpoints("c1")
    store.delete_checkpoint("c1", "cp")
    store.get_graph("c1")
    store.run(graph_window(store.state, "c1"))
    store.write_summary("c1", first.head_message_id, "a summary")
    store.redact_message("c1", first.message_ids[0], reason="a test")
    store.state.cluster = True  # the job follows the reply on a Redis Cluster
    store.redact_message("c1", first.message_ids[1])
    store.state.cluster = False
    store.client.delete(store.state.keyspace.chat("c1").key("alias"))  # something to repair
    store.client.hset(store.state.keyspace.chat("c1").key("chat"), "message_count", 0)
    store.verify_chat("c1", repair=True)
    token = leases.new_lease_token()
    store.run(leases.take_lease(store.state, "c1", token, 1000))
    store.run(leases.give_lease(store.state, "c1", token))
    store.run(turns.take_turn(store.state, "c1", token, 1000))
    store.run(turns.give_turn(store.state, "c1", token))
    store.expire_chat("c1", 3600)
    stream_id = store.run(answer_stream.begin_stream(store.state, "c1", "main", writer_ttl_ms=1000))
    store.run(answer_stream.write_stream(store.state, "c1", stream_id, 1, "a", writer_ttl_ms=1000))
    store.active_stream("c1")
    store.run(
        answer_stream.end_stream(
            store.state, "c1", stream_id, done=True, detail="x", keep_ms=60_000
        )
    )
    list(store.read_stream("c1", stream_id))
    store.client.zadd(store.state.keyspace.all_chats_index, {"gone": 1})
    store.list_chats()
    store.run(jobs.enqueue_job(store.state, "c1", ("chat", "c1", "branch", "main", "job", "j")))
    route = f"{store.state.keyspace.base}:scan:{{n0}}"  # how a Cluster's primary is scanned
    store.run(_one(scanning.scan_call(route, 0, "nothing:*")))
    store.migrate()
    exported = list(store.export_chat("c1"))
    store.delete_chat("c1")
    store.import_chat(exported)
    store.delete_chat("c1")


def exercise_the_langgraph_saver(store: Any) -> None:
    """Every script of the LangGraph saver, on threads t1 and t2 (a copy of it)."""
    from langgraph.checkpoint.base import empty_checkpoint

    from ctxstore.integrations.langgraph import CtxStoreSaver

    saver = CtxStoreSaver(store)
    config = {"configurable": {"thread_id": "t1", "checkpoint_ns": ""}}
    first = empty_checkpoint()
    first["channel_values"], first["channel_versions"] = {"a": 1}, {"a": "1"}
    stored = saver.put(config, first, {"step": 0}, {"a": "1"})
    saver.put_writes(stored, [("a", 2)], "task")
    saver.put(stored, empty_checkpoint(), {"step": 1}, {})
    assert saver.get_tuple(config) is not None
    assert list(saver.list(config, limit=1))
    assert saver.get_delta_channel_history(config=config, channels=["a"])["a"]["seed"] == 1
    saver.copy_thread("t1", "t2")
    saver.prune(["t2"])
    saver.put(config, empty_checkpoint(), {"step": 2, "run_id": "run-1"}, {})
    saver.delete_for_runs(["run-1"])
    saver.delete_thread("t1")
    saver.delete_thread("t2")


def test_callers_pass_exactly_the_declared_keys(
    recorded_calls: list[protocol.Call[Any]], namespace: str
) -> None:
    url = f"memory://{namespace}"  # one embedded server for both stores
    store = ctxstore.connect(url, namespace=namespace, encryption=None).admin()  # in the clear
    exercise_every_operation(store)
    sealed = ctxstore.connect(  # the scripts of a store with encryption: its users' data keys
        url, namespace=namespace, encryption=LocalKeyProvider.from_keys(
            {"kek-1": bytes(32)}, current="kek-1"
        )
    ).admin()  # fmt: skip
    sealed.open_chat("c1", "alice")
    sealed.append("c1", None, [{"role": "user", "content": "x"}], expected_head=None)
    sealed.rotate_keys()
    sealed.delete_chat("c1")
    store.open_chat("c1", "alice")  # a chat in the clear, sealed by the migration
    store.append("c1", None, [{"role": "user", "content": "x"}], expected_head=None)
    assert sealed.migrate(encrypt=True).sealed == 1
    exercise_the_langgraph_saver(store)
    seen = set()
    for call in recorded_calls:
        if call.script is None:
            continue
        seen.add(call.script.name)
        names = call.script.key_names
        assert len(call.keys) in (call.script.required_keys, len(names)), call.script.name
        for key, name in zip(call.keys, names, strict=False):
            if name in CHAT_KEY_NAMES:
                assert key == f"ctx:{namespace}:{{c1}}:{name}", (call.script.name, key)
            elif name == "jobs":
                assert key.startswith(f"ctx:{namespace}:jobs:{{"), (call.script.name, key)
            elif name.startswith("staged_"):
                staged = name.removeprefix("staged_")
                assert re.fullmatch(rf"ctx:{namespace}:\{{c1\}}:staging:[a-z2-7]+:{staged}", key), (
                    call.script.name,
                    key,
                )
            elif name == "trimmed":
                assert key.startswith(f"ctx:{namespace}:trimmed:{{"), (call.script.name, key)
            elif name == "route":
                assert key.startswith(f"ctx:{namespace}:scan:{{"), (call.script.name, key)
            elif name == "owned":
                assert re.fullmatch(rf"ctx:{namespace}:owned:\{{[^{{}}]+\}}", key), key
            elif name == "dkey":
                assert key == f"ctx:{namespace}:dkey:{{alice}}", key
            elif name in THREAD_KEY_NAMES:
                suffix = THREAD_KEY_NAMES[name]
                assert re.fullmatch(rf"ctx:{namespace}:lg:\{{t[12]\}}:{suffix}", key), key
            else:
                assert name in ("index", "all_chats", "user_chats"), call.script.name
                assert ":idx:" in key, (call.script.name, key)
    assert seen == set(SCRIPTS)


def header_names(script: str, prefix: str) -> list[str]:
    """The ``-- <prefix>.<name>`` lines of a script's header, in order."""
    header = (script_dir() / f"{script}.lua").read_text().split("\n\n", 1)[0]
    return re.findall(rf"^--\s+{prefix}\.(\w+)\s", header, re.MULTILINE)


def test_the_append_call_fields_are_named_once_in_wire_order() -> None:
    """``AppendCall`` is ARGV[1] field by field, in the order of the script's header: the
    loader gives the script those names (lib/calls.lua), so a new field is one header line
    and one ``AppendCall`` field."""
    from ctxstore._core.ops.append import AppendCall

    assert header_names("append", "call") == list(AppendCall._fields)
    calls, _replies = header_fields((script_dir() / "append.lua").read_text())
    assert [name for name, _shape in calls] == list(AppendCall._fields)
    named = ", ".join(f"{name} = v{index}" for index, name in enumerate(AppendCall._fields))
    assert f"  return {{{named}}}" in load_script("append").source
    assert f"  return {{{named}}}" in load_library().code
    body = (script_dir() / "append.lua").read_text().split("\n\n", 1)[1]
    assert "string.match(ARGV[1]" not in body  # the fields are read by name only
    used = set(re.findall(r"\bcall\.(\w+)", body))
    assert used == set(AppendCall._fields), used ^ set(AppendCall._fields)


def test_the_append_reply_is_named_once_in_its_order() -> None:
    """Both replies (a first call's, and a resent call's from lib/requests.lua) are tables by
    name holding exactly the header's ``reply.<name>`` fields, which ``AppendReply`` lists in
    the same order; the loader orders them (lib/calls.lua)."""
    from ctxstore._core.ops.append import AppendReply

    assert header_names("append", "reply") == list(AppendReply._fields)
    body = (script_dir() / "append.lua").read_text()
    recalled = (script_dir() / "lib" / "requests.lua").read_text()
    tables = re.findall(r"return reply_of\(\{(.*?)\}\)", body, re.DOTALL)
    tables += re.findall(r"return \{(branch = .*?)\}\n", recalled, re.DOTALL)
    assert len(tables) == 2
    for table in tables:
        names = [item.split("=")[0].strip() for item in top_level_items(table)]
        assert sorted(names) == sorted(AppendReply._fields), names


@pytest.mark.parametrize(
    ("fields", "refused"),
    [
        ("only\tthree\tfields", "fields"),
        ("\t".join(["x"] * 19), "fields"),  # one too many
        ("\t".join(["", "", "", "", "raise", "raise", "soon", *[""] * 11]), "now"),
        ("\t".join(["", "", "", "", "raise", "raise", "1", *[""] * 6, "x", *[""] * 4]), "base"),
    ],
)
def test_malformed_call_fields_are_refused_by_name(
    namespace: str, fields: str, refused: str
) -> None:
    store = ctxstore.connect("memory://", namespace=namespace).admin()
    store.upsert_chat("c1", "alice")
    script = load_script("append")
    chat = store.state.keyspace.chat("c1")
    keys = [chat.key(name) for name in script.key_names[: script.required_keys]]
    call = protocol.script_call(script, keys, (fields, "", b"", "", b"r"), parse=lambda r: r)

    def operation() -> protocol.Operation[Any]:
        return (yield call)

    with pytest.raises(ctxstore.ValidationError, match="malformed call fields") as refusal:
        store.run(operation())
    assert refusal.value.details["reason"] == "malformed call fields", refused
    store.close()


def top_level_items(text: str) -> list[str]:
    """The comma-separated items of a Lua list, commas inside calls and tables left alone."""
    items, depth, current = [], 0, ""
    for char in text:
        depth += char in "({"
        depth -= char in ")}"
        if char == "," and depth == 0:
            items.append(current.strip())
            current = ""
        else:
            current += char
    return [item for item in [*items, current.strip()] if item]
