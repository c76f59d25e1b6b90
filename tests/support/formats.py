"""Format fixtures: a keyspace written by one release, kept as text, loaded into any server.

A fixture (``tests/fixtures/formats/format-<N>.jsonl``) is every key of a namespace that a
release of format N wrote, one JSON line per key: ``{"key", "type", "value", "ttl_ms"}`` with
the namespace's base written as ``<base>`` wherever it is in a key name (a job stream's
hash tag holds it too) and every byte string as base64 (records are msgpack).
It is loaded with plain commands (no ``DUMP``/``RESTORE``, whose encoding differs between
servers and the embedded store), so one file serves the embedded store, a redis-server, a
Cluster and Valkey. ``format-<N>.reads.json`` beside it holds what every read operation
returned on it when it was made: a later release must read the same.

``python -m tests.support.formats URL`` writes the fixture of this release's format (run it
once per new format, then keep the files; docs/compatibility.md); with ``--sealed``, the
fixture of its sealed twin, with the key provider directory that opens it
(``format-<N>.keys``, test keys only).
"""

from __future__ import annotations

import base64
import json
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "formats"
#: The fixture's clock: every write of the fixture happened at this epoch millisecond on.
FIXTURE_TIME = 1_780_000_000_000
BASE_MARK = "<base>"


#: The namespace a sealed format's fixture was written in: its records are bound to it (their
#: associated data), so it is loaded under another key prefix, never another namespace.
SEALED_NAMESPACE = "fixture"


def keys_path(format_: str) -> Path:
    """The key provider directory of a sealed format's fixture (what opens its records)."""
    return FIXTURES / f"format-{format_}.keys"


def fixture_provider(format_: str, into: Path) -> Any:
    """The key provider of ``format_``'s fixture, on a copy of its keys in ``into`` (a test may
    make keys); None for a fixture in the clear."""
    import shutil

    from ctxstore.crypto import LocalKeyProvider

    source = keys_path(format_)
    if not source.is_dir():
        return None
    copy = into / f"format-{format_}.keys"
    shutil.copytree(source, copy)
    return LocalKeyProvider(copy)


def fixture_path(format_: str) -> Path:
    return FIXTURES / f"format-{format_}.jsonl"


def reads_path(format_: str) -> Path:
    return FIXTURES / f"format-{format_}.reads.json"


def _b64(value: bytes) -> str:
    return base64.b64encode(value).decode()


def _unb64(value: str) -> bytes:
    return base64.b64decode(value)


def dump_keys(client: Any, base: str) -> list[dict[str, Any]]:
    """Every key under ``<base>:`` as fixture lines, sorted by key (a single server's client)."""
    lines = []
    for raw_key in sorted(client.scan_iter(match=f"{base}:*")):
        key = raw_key.decode()
        kind = client.type(raw_key)
        kind = kind.decode() if isinstance(kind, bytes) else kind
        value: Any
        if kind == "string":
            value = _b64(client.get(raw_key))
        elif kind == "list":
            value = [_b64(item) for item in client.lrange(raw_key, 0, -1)]
        elif kind == "hash":
            value = {_b64(k): _b64(v) for k, v in sorted(client.hgetall(raw_key).items())}
        elif kind == "zset":
            value = [[_b64(m), s] for m, s in client.zrange(raw_key, 0, -1, withscores=True)]
        elif kind == "set":
            value = sorted(_b64(m) for m in client.smembers(raw_key))
        elif kind == "stream":
            entries = client.xrange(raw_key)
            groups = [
                {"name": g["name"].decode(), "last": g["last-delivered-id"].decode()}
                for g in client.xinfo_groups(raw_key)
            ]
            value = {
                "entries": [
                    [eid.decode(), [[_b64(k), _b64(v)] for k, v in fields.items()]]
                    for eid, fields in entries
                ],
                "groups": groups,
            }
        else:
            raise ValueError(f"{key}: a {kind} key has no fixture form")
        ttl = client.pttl(raw_key)
        lines.append(
            {
                "key": key.replace(base, BASE_MARK),
                "type": kind,
                "value": value,
                "ttl_ms": ttl if ttl > 0 else None,
            }
        )
    return lines


def load_keys(client: Any, base: str, lines: Iterable[dict[str, Any]]) -> int:
    """Write fixture lines under ``base`` (keys must not exist yet); returns how many keys."""
    count = 0
    for line in lines:
        key = line["key"].replace(BASE_MARK, base)
        kind, value = line["type"], line["value"]
        if kind == "string":
            client.set(key, _unb64(value))
        elif kind == "list":
            client.rpush(key, *[_unb64(item) for item in value])
        elif kind == "hash":
            client.hset(key, mapping={_unb64(k): _unb64(v) for k, v in value.items()})
        elif kind == "zset":
            client.zadd(key, {_unb64(member): score for member, score in value})
        elif kind == "set":
            client.sadd(key, *[_unb64(member) for member in value])
        elif kind == "stream":
            for entry_id, fields in value["entries"]:
                client.xadd(key, {_unb64(k): _unb64(v) for k, v in fields}, id=entry_id)
            for group in value["groups"]:
                client.xgroup_create(key, group["name"], id=group["last"], mkstream=True)
        if line.get("ttl_ms"):
            client.pexpire(key, line["ttl_ms"])
        count += 1
    return count


def read_lines(format_: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in fixture_path(format_).read_text().splitlines() if line]


# --- what the fixture holds, and what reading it returns ----------------------------------------

USER, OTHER = "ada", "bo"


def clock_from(start: int) -> Callable[[], int]:
    now = [start]

    def clock() -> int:
        now[0] += 1
        return now[0]

    return clock


def build(store: Any) -> dict[str, str]:
    """Write the fixture's chats through the public API (an admin handle), and return the ids
    a reader needs: chats with branches, an edit, checkpoints, a summary, metadata, usage, a
    title, an answer stream, a pending compaction job, a redacted message."""
    from ctxstore._core.ops import streams as answer_stream
    from ctxstore.models import CompactionTrigger

    ids: dict[str, str] = {}
    store.upsert_chat("trip", USER, {"topic": "travel", "n": 3})
    first = store.append(
        "trip",
        "main",
        [
            {"role": "system", "content": "You plan trips."},
            {"role": "user", "content": "Plan a week in Lisbon."},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "weather", "arguments": '{"city":"Lisbon"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 24C"},
            {"role": "assistant", "content": "Day 1: Alfama. Day 2: Belem."},
        ],
        expected_head=None,
    )
    ids["trip_head"] = first.head_message_id
    chain = store.load_branch("trip", "main").messages
    ids["trip_user"] = chain[1]["id"]
    # An edit: the user's question again, differently, on a new branch.
    edit = store.append(
        "trip",
        "main",
        [{"id": ids["trip_user"], "role": "user", "content": "Plan a weekend in Porto."}],
        expected_head=ids["trip_head"],
        on_existing="fork",
    )
    ids["edit_branch"] = edit.branch
    store.append(
        "trip",
        edit.branch,
        [{"role": "assistant", "content": "Saturday: Ribeira."}],
        expected_head=edit.head_message_id,
    )
    store.upsert_checkpoint("trip", "before-edit", ids["trip_head"])
    store.create_branch("trip", chain[2]["id"], base="main", name="tools", activate=False)
    store.write_summary("trip", chain[3]["id"], "Asked for a Lisbon week; weather was sunny.")
    store.update_chat("trip", title="Lisbon week", metadata={"pinned": True})
    store.add_usage("trip", {"prompt_tokens": 120, "completion_tokens": 30})
    store.set_active_branch("trip", "main")

    # Responses items and UI messages, a chosen id, per-message metadata.
    from ctxstore.models import NewMessage

    store.upsert_chat("mixed", USER)
    store.append(
        "mixed",
        "main",
        [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
            {"id": "ui-1", "role": "assistant", "parts": [{"type": "text", "text": "hello"}]},
            NewMessage({"role": "user", "content": "bye"}, id="chosen-3", metadata={"lang": "en"}),
        ],
        expected_head=None,
    )
    # An answer stream, finished, and a compaction job still pending.
    stream_id = store.run(
        answer_stream.begin_stream(store.state, "mixed", "main", writer_ttl_ms=600_000)
    )
    for number, piece in enumerate(("Hel", "lo ", "there"), start=1):
        store.run(
            answer_stream.write_stream(
                store.state, "mixed", stream_id, number, piece, writer_ttl_ms=600_000
            )
        )
    store.run(
        answer_stream.end_stream(
            store.state, "mixed", stream_id, done=True, detail="chosen-3", keep_ms=10**9
        )
    )
    ids["stream"] = stream_id
    store.upsert_chat("long", OTHER)
    head = None
    for number in range(8):
        head = store.append(
            "long",
            "main",
            [{"role": "user", "content": f"message {number} " + "word " * 20}],
            expected_head=head,
            compaction=CompactionTrigger(soft_tokens=50, min_recent_messages=2),
        ).head_message_id
    secret = store.append(
        "long", "main", [{"role": "user", "content": "my card is 4111"}], expected_head=head
    )
    store.redact_message("long", secret.head_message_id, reason="card number")
    return ids


def reads(store: Any, ids: dict[str, str]) -> dict[str, Any]:
    """What every read operation returns on the fixture, as plain JSON data."""
    out: dict[str, Any] = {}
    for user in (USER, OTHER):
        out[f"list_chats {user}"] = [plain(info) for info in store.list_chats(user_id=user)]
    for chat_id in ("trip", "mixed", "long"):
        out[f"get_chat {chat_id}"] = plain(store.get_chat(chat_id))
        branches = store.list_branches(chat_id)
        out[f"list_branches {chat_id}"] = [plain(branch) for branch in branches]
        out[f"list_checkpoints {chat_id}"] = [plain(c) for c in store.list_checkpoints(chat_id)]
        out[f"get_graph {chat_id}"] = plain(store.get_graph(chat_id))
        out[f"export_chat {chat_id}"] = [plain(record) for record in store.export_chat(chat_id)]
        for branch in branches:
            name = branch.name
            out[f"load_branch {chat_id} {name}"] = plain(store.load_branch(chat_id, name))
            out[f"load_branch {chat_id} {name} after_summary"] = plain(
                store.load_branch(chat_id, name, after_summary=True)
            )
            out[f"branch_size {chat_id} {name}"] = plain(store.branch_size(chat_id, name))
            out[f"get_branch {chat_id} {name}"] = plain(store.get_branch(chat_id, name))
            out[f"active_stream {chat_id} {name}"] = store.active_stream(chat_id, name)
            for message in store.load_branch(chat_id, name).messages:
                mid = message["id"]
                out[f"get_message {chat_id} {mid}"] = plain(store.get_message(chat_id, mid))
                out[f"message_versions {chat_id} {mid}"] = plain(
                    store.message_versions(chat_id, mid)
                )
                out[f"get_chain {chat_id} {mid}"] = plain(store.get_chain(chat_id, mid))
    out["get_checkpoint trip before-edit"] = plain(store.get_checkpoint("trip", "before-edit"))
    out["read_stream mixed"] = [plain(p) for p in store.read_stream("mixed", ids["stream"])]
    return out


def plain(value: Any) -> Any:
    """``value`` as JSON data (models, dataclasses, bytes and tuples included)."""
    import dataclasses

    if hasattr(value, "model_dump"):
        return plain(value.model_dump())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return plain({f.name: getattr(value, f.name) for f in dataclasses.fields(value)})
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    if isinstance(value, bytes):
        return {"b64": _b64(value)}
    return value


def _write(format_: str, *, sealed: bool) -> None:
    """Build the fixture on a fresh redis-server (a URL in argv) and write its two files; a
    sealed one with a new key provider directory beside them."""
    import redis

    import ctxstore
    from ctxstore.crypto import LocalKeyProvider

    url = sys.argv[1]
    namespace = SEALED_NAMESPACE
    raw = redis.Redis.from_url(url)
    if list(raw.scan_iter(match=f"ctx:{namespace}:*", count=1000)):
        raise SystemExit(f"ctx:{namespace}:* is not empty on {url}")
    provider = None
    if sealed:
        if keys_path(format_).exists():
            raise SystemExit(f"{keys_path(format_)} exists: remove it to make a new fixture")
        provider = LocalKeyProvider(keys_path(format_))
    with ctxstore.connect(
        url,
        namespace=namespace,
        clock=clock_from(FIXTURE_TIME),
        estimate_tokens=len,
        encryption=provider,
    ) as opened:
        store = opened.admin()
        ids = build(store)
        lines = dump_keys(raw, f"ctx:{namespace}")
        fixture_path(format_).write_text("".join(json.dumps(line) + "\n" for line in lines))
        reads_path(format_).write_text(
            json.dumps({"ids": ids, "reads": reads(store, ids)}, indent=1, sort_keys=True) + "\n"
        )
    print(f"wrote {fixture_path(format_)} ({len(lines)} keys) and {reads_path(format_)}")


def iter_formats() -> Iterator[str]:
    for path in sorted(FIXTURES.glob("format-*.jsonl")):
        yield path.stem.removeprefix("format-")


if __name__ == "__main__":
    from ctxstore._core.format.versions import FORMAT, SEALED_FORMAT

    if "--sealed" in sys.argv:
        _write(SEALED_FORMAT, sealed=True)
    else:
        _write(FORMAT, sealed=False)
