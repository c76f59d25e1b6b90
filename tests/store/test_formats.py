"""Every storage format this release reads keeps a fixture (tests/fixtures/formats/): a
keyspace an earlier release wrote, loaded into the embedded store, a redis-server and a
Cluster, read through every read operation (what each returns must be what it returned when
the fixture was made) and written to (every chat still verifies clean after). A format
constant that changes without a new fixture fails here (docs/compatibility.md)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

import ctxstore
from ctxstore._core.format import portable, versions
from ctxstore.worker import Worker
from tests.conftest import ENCRYPTED
from tests.support.formats import (
    FIXTURE_TIME,
    SEALED_NAMESPACE,
    build,
    clock_from,
    fixture_path,
    fixture_provider,
    iter_formats,
    load_keys,
    read_lines,
    reads,
    reads_path,
)
from tests.support.keyspace import raw_client

ROOT = Path(__file__).resolve().parents[2]
BASE_LUA = ROOT / "lua" / "lib" / "base.lua"


def lua_formats() -> tuple[str, set[str]]:
    text = BASE_LUA.read_text()
    written = re.search(r"^local FORMAT = '(\d+)'$", text, re.M)
    read = re.search(r"^local FORMATS_READ = \{(.*)\}$", text, re.M)
    assert written is not None, "base.lua must define FORMAT"
    assert read is not None, "base.lua must define FORMATS_READ"
    return written.group(1), set(re.findall(r"\['(\d+)'\] = true", read.group(1)))


def test_the_scripts_and_the_client_agree_on_the_formats() -> None:
    written, read = lua_formats()
    assert written == versions.FORMAT
    assert read == set(versions.FORMATS_READ)
    assert versions.FORMAT in versions.FORMATS_READ


def test_every_format_this_release_reads_has_a_fixture() -> None:
    """A new format comes with its fixture (``python -m tests.support.formats URL``), and
    the fixture of every format still read stays."""
    for format_ in versions.FORMATS_READ:
        assert fixture_path(format_).is_file(), f"format {format_} has no fixture"
        assert reads_path(format_).is_file(), f"format {format_} has no recorded reads"
    assert set(versions.FORMATS_READ) <= set(iter_formats())


def test_the_export_format_this_release_reads_has_a_fixture() -> None:
    """The fixture's recorded exports are of the export format this release writes and reads
    (``portable.FORMAT_VERSION``): changing it needs a new fixture too."""
    for format_ in versions.FORMATS_READ:
        exported = json.loads(reads_path(format_).read_text())["reads"]["export_chat trip"]
        assert exported[0]["version"] == portable.FORMAT_VERSION


def where_sealed(format_: str) -> bool:
    """Whether ``format_``'s fixture is of sealed chats (it keeps its keys beside it)."""
    from tests.support.formats import keys_path

    return keys_path(format_).is_dir()


def loaded(
    backend: str, namespace: str, format_: str, keys: Path
) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """The fixture of ``format_`` loaded into ``namespace``, an admin store on it whose clock
    goes on after the fixture's, the recorded ids and reads, and where it was loaded (the
    settings a worker takes). A sealed format's fixture is loaded under a key prefix of its own
    in the namespace it was written in (its records are bound to it), with a copy of its keys
    (in ``keys``)."""
    provider = fixture_provider(format_, keys)
    where: dict[str, Any] = {"prefix": "ctx", "namespace": namespace, "encryption": provider}
    if provider is not None:
        where.update(prefix=f"t{namespace}", namespace=SEALED_NAMESPACE)
    client = raw_client(backend)
    load_keys(client, f"{where['prefix']}:{where['namespace']}", read_lines(format_))
    client.close()
    store = ctxstore.connect(
        backend, clock=clock_from(FIXTURE_TIME + 10**6), estimate_tokens=len, **where
    )
    return store, json.loads(reads_path(format_).read_text()), where


FORMATS = sorted(iter_formats())


@pytest.mark.parametrize("format_", FORMATS)
def test_a_fixture_reads_as_it_did(
    backend: str, namespace: str, format_: str, tmp_path: Path
) -> None:
    store, recorded, _where = loaded(backend, namespace, format_, tmp_path)
    with store:
        found = reads(store.admin(), recorded["ids"])
    differ = [name for name in recorded["reads"] if found.get(name) != recorded["reads"][name]]
    assert not differ, f"{len(differ)} reads differ, the first: {differ[0]}"
    assert found.keys() == recorded["reads"].keys()


@pytest.mark.parametrize("format_", FORMATS)
def test_a_fixture_takes_writes_and_verifies_clean(
    backend: str, namespace: str, format_: str, tmp_path: Path
) -> None:
    if ENCRYPTED and where_sealed(format_) is False:
        pytest.skip("a worker of the encrypted pass seals: the plain pass writes to this one")
    store, recorded, where = loaded(backend, namespace, format_, tmp_path)
    ids = recorded["ids"]
    with store:
        admin = store.admin()
        ada = store.for_user("ada")
        for branch in admin.list_branches("trip"):
            head = branch.head_message_id
            ada.append(
                "trip", branch.name, [{"role": "user", "content": "more"}], expected_head=head
            )
        ada.create_branch("trip", ids["trip_user"], name="again", activate=False)
        ada.upsert_checkpoint("trip", "later", ids["trip_head"])
        ada.write_summary("trip", ids["trip_head"], "A Lisbon week, planned.")
        ada.redact_message("trip", ids["trip_user"])
        ada.update_chat("mixed", title="renamed")
        ada.add_usage("mixed", {"prompt_tokens": 1})
        # The pending compaction job of the fixture is taken and done by a worker of this one.
        stats = Worker(
            backend,
            namespaces=[where["namespace"]],
            prefix=where["prefix"],
            encryption=where["encryption"],
            compactify=lambda messages: f"{len(messages)} messages",
            estimate_tokens=len,
            poll_ms=20,
        ).run(burst=True)
        assert stats.summarized >= 1
        assert admin.load_branch("long", after_summary=True).summary is not None
        records = list(admin.export_chat("trip"))
        admin.import_chat(records, chat_id="trip-copy")
        for chat_id in ("trip", "mixed", "long", "trip-copy"):
            assert admin.verify_chat(chat_id).problems == (), chat_id
        assert admin.delete_chat("mixed")
        assert [info.id for info in admin.list_chats(user_id="ada")] == ["trip-copy", "trip"]
        report = admin.migrate()
        assert (report.chats, report.failed) == (3, [])


def test_a_new_fixture_is_built_as_the_recorded_one_was(namespace: str) -> None:
    """The builder still runs on this release (a new format's fixture is made with it), and
    what it writes reads the same way as the recorded fixture does, up to generated ids."""
    url = f"memory://{namespace}"
    with ctxstore.connect(
        url, namespace=namespace, clock=clock_from(FIXTURE_TIME), estimate_tokens=len
    ) as opened:
        ids = build(opened.admin())
        found = reads(opened.admin(), ids)
    recorded = json.loads(reads_path(versions.FORMAT).read_text())["reads"]

    def named(reads_: dict[str, Any]) -> set[str]:  # the reads named without a message id
        return {name for name in reads_ if name.split()[0] not in BY_MESSAGE_ID}

    assert len(found) == len(recorded)
    assert named(found) == named(recorded)
    assert found["get_chat trip"]["title"] == recorded["get_chat trip"]["title"]


BY_MESSAGE_ID = {"get_message", "message_versions", "get_chain"}


def test_the_plain_fixture_sealed_by_migrate_encrypt_reads_as_it_did(
    backend: str, namespace: str, tmp_path: Path
) -> None:
    """``migrate(encrypt=True)`` seals every chat of the format-2 fixture in place: read by a
    store with encryption, each read returns what it returned in the clear, and every chat
    verifies clean."""
    from ctxstore.crypto import LocalKeyProvider

    plain, recorded, _where = loaded(backend, namespace, "2", tmp_path)
    plain.close()
    provider = LocalKeyProvider.from_keys({"kek-migrate": bytes(range(32))}, current="kek-migrate")
    with ctxstore.connect(
        backend, namespace=namespace, clock=clock_from(FIXTURE_TIME + 10**6),
        estimate_tokens=len, encryption=provider,
    ) as store:  # fmt: skip
        admin = store.admin()
        report = admin.migrate(encrypt=True)
        assert (report.sealed, report.failed) == (report.chats, [])
        assert report.by_format == {"2": report.chats}
        found = reads(admin, recorded["ids"])
        for chat in admin.list_chats():
            assert admin.verify_chat(chat.id).problems == (), chat.id
    differ = [name for name in recorded["reads"] if found.get(name) != recorded["reads"][name]]
    assert not differ, f"{len(differ)} reads differ, the first: {differ[0]}"
