"""The commands on a store with encryption: ``--keys PATH`` (or ``CTXSTORE_KEYS``) names the
key directory of a LocalKeyProvider; ``rotate-keys`` adds a key-encryption key and wraps every
data key under it; a path that is no key directory is refused, never a new empty one."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

import ctxstore
from ctxstore.crypto import LocalKeyProvider
from tests.cli.conftest import Run


def seeded(url: str, namespace: str, keys: Path) -> None:
    with ctxstore.connect(url, namespace=namespace, encryption=LocalKeyProvider(keys)) as store:
        admin = store.admin()
        admin.open_chat("c1", "alice")
        admin.append("c1", None, [{"role": "user", "content": "sealed words"}], expected_head=None)


def test_the_commands_read_a_sealed_chat_with_keys(
    memory_url: str, tmp_path: Path, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    namespace = f"n{uuid.uuid4().hex[:8]}"
    seeded(memory_url, namespace, tmp_path / "keys")
    base = ("--url", memory_url, "--namespace", namespace)
    code, out, _err = run(*base, "--keys", str(tmp_path / "keys"), "export", "c1")
    assert code == 0
    assert "sealed words" in out
    code, _out, err = run(*base, "export", "c1")  # without keys: refused, said why
    assert code == 1
    assert "encryption" in err
    monkeypatch.setenv("CTXSTORE_KEYS", str(tmp_path / "keys"))
    code, out, _err = run(*base, "export", "c1")
    assert code == 0
    assert "sealed words" in out


def test_a_path_that_is_no_key_directory_is_refused(
    memory_url: str, tmp_path: Path, run: Run
) -> None:
    code, _out, err = run("--url", memory_url, "--keys", str(tmp_path / "typo"), "chats")
    assert code == 1
    assert "not a key directory" in err
    assert not (tmp_path / "typo").exists()


def test_rotate_keys_adds_a_key_and_rewraps_every_data_key(
    memory_url: str, tmp_path: Path, run: Run
) -> None:
    namespace = f"n{uuid.uuid4().hex[:8]}"
    keys = tmp_path / "keys"
    seeded(memory_url, namespace, keys)
    before = (keys / "current").read_text()
    code, out, _err = run(
        "--url", memory_url, "--namespace", namespace, "--keys", str(keys), "rotate-keys",
        "--json",
    )  # fmt: skip
    assert code == 0
    rotation = json.loads(out)
    assert rotation["data_keys"] == 1
    assert rotation["key_id"] == (keys / "current").read_text() != before
    (keys / "keys" / before).unlink()  # the old key can go: the data key is wrapped anew
    code, out, _err = run(
        "--url", memory_url, "--namespace", namespace, "--keys", str(keys), "export", "c1"
    )
    assert code == 0
    assert "sealed words" in out


def test_rotate_keys_needs_keys(memory_url: str, run: Run) -> None:
    code, _out, err = run("--url", memory_url, "rotate-keys")
    assert code == 1
    assert "--keys" in err


def test_migrate_encrypt_seals_the_chats_in_the_clear(
    memory_url: str, tmp_path: Path, run: Run
) -> None:
    namespace = f"n{uuid.uuid4().hex[:8]}"
    keys = tmp_path / "keys"
    LocalKeyProvider(keys)  # an empty directory gets its first key-encryption key
    with ctxstore.connect(memory_url, namespace=namespace, encryption=None) as plain:
        plain.admin().open_chat("c1", "alice")
        plain.admin().append(
            "c1", None, [{"role": "user", "content": "clear words"}], expected_head=None
        )
    base = ("--url", memory_url, "--namespace", namespace)
    code, out, err = run(*base, "migrate", "--encrypt")  # no keys: refused, said why
    assert (code, out) == (1, "")
    assert "encryption" in err
    code, out, _err = run(*base, "--keys", str(keys), "migrate", "--encrypt", "--json")
    assert code == 0
    assert (json.loads(out)["sealed"], json.loads(out)["encrypt"]) == (1, True)
    code, out, _err = run(*base, "--keys", str(keys), "export", "c1")
    assert code == 0
    assert "clear words" in out
    code, _out, err = run(*base, "export", "c1")
    assert code == 1
    assert "encryption" in err


def test_export_sealed_writes_a_backup_that_imports_back_with_the_keys(
    memory_url: str, tmp_path: Path, run: Run
) -> None:
    namespace = f"n{uuid.uuid4().hex[:8]}"
    keys = tmp_path / "keys"
    seeded(memory_url, namespace, keys)
    base = ("--url", memory_url, "--namespace", namespace, "--keys", str(keys))
    backup = tmp_path / "c1.jsonl"
    code, _out, _err = run(
        *base, "export", "c1", "--format", "jsonl", "--sealed", "-o", str(backup)
    )
    assert code == 0
    assert "sealed words" not in backup.read_text()
    assert json.loads(backup.read_text().splitlines()[0])["sealed"]["namespace"] == namespace
    code, _out, err = run(*base, "export", "c1", "--sealed")  # a graph is no backup
    assert code == 1
    assert "--format jsonl" in err
    code, _out, _err = run(*base, "import", str(backup), "--chat-id", "c2")
    assert code == 0
    code, out, _err = run(*base, "export", "c2", "--format", "jsonl")
    assert "sealed words" in out
