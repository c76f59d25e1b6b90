"""``local://`` refuses what it cannot use with a ConfigurationError naming the path, before
anything is started or written; its URL options, its binary lookup and its CLI commands."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import ctxstore
from ctxstore.cli.main import main
from ctxstore.errors import ConfigurationError
from ctxstore.store.connection import parse_url
from ctxstore.store.local import DEFAULT_IDLE_TIMEOUT, LocalServer, parse_local_url, place_of
from ctxstore.store.local import binary as binaries
from ctxstore.store.local.keeper import poll_interval, server_command
from tests.local.conftest import require_local_binary, starts_logged


@pytest.mark.parametrize(
    ("url", "path", "idle"),
    [
        ("local://./ctxdata", "./ctxdata", DEFAULT_IDLE_TIMEOUT),
        ("local://ctxdata?idle=30", "ctxdata", 30.0),
        ("local:///srv/ctx?idle=0", "/srv/ctx", 0.0),
        ("local://~/ctx?idle=0.5", "~/ctx", 0.5),
    ],
)
def test_the_url_names_a_directory_and_an_idle_timeout(url: str, path: str, idle: float) -> None:
    assert parse_local_url(url) == (path, idle)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("local://", "needs a directory"),
        ("local://?idle=3", "needs a directory"),
        ("local://x?idle=-1", "idle must be a number of seconds >= 0"),
        ("local://x?idle=soon", "idle must be a number of seconds >= 0"),
        ("local://x?idle=inf", "idle must be a number of seconds >= 0"),
        ("local://x?port=1", "unknown option 'port'"),
        ("local://x?idle", "malformed options"),
    ],
)
def test_bad_urls_are_refused(url: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        ctxstore.connect(url)


def test_every_spelling_of_a_directory_is_one_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "real").mkdir()
    (tmp_path / "alias").symlink_to(tmp_path / "real")
    urls = ["local://real", "local://./real/", f"local://{tmp_path}/alias?idle=5"]
    targets = {parse_url(url).url for url in urls}
    assert targets == {f"local://{tmp_path / 'real'}"}


def test_a_path_that_is_a_file_is_refused_and_left_alone(tmp_path: Path) -> None:
    file = tmp_path / "notes.txt"
    file.write_text("mine")
    with pytest.raises(ConfigurationError, match=f"'{file}' is not a directory"):
        ctxstore.connect(f"local://{file}")
    assert file.read_text() == "mine"
    assert sorted(tmp_path.iterdir()) == [file]


def test_status_and_stop_never_create_a_directory(tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    with pytest.raises(ConfigurationError, match=f"'{missing}' does not exist"):
        place_of(str(missing), create=False)
    assert main(["local", "status", str(missing)]) == 1
    assert not missing.exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another user")
def test_a_directory_this_user_cannot_write_is_refused() -> None:
    """As the user nobody (root may write anywhere; the effective ids are what counts): a
    directory of root's, mode 0755, in a folder nobody may enter (pytest's own temporary
    folders are private to root)."""
    outer = Path(tempfile.mkdtemp())
    outer.chmod(0o755)
    directory = outer / "roots"
    directory.mkdir(mode=0o755)
    os.setegid(65534)
    os.seteuid(65534)
    try:
        with pytest.raises(ConfigurationError, match=f"'{directory}' is not writable by this user"):
            ctxstore.connect(f"local://{directory}")
        with pytest.raises(ConfigurationError, match=f"cannot create .*'{directory}/sub'"):
            ctxstore.connect(f"local://{directory}/sub")
    finally:
        os.seteuid(0)
        os.setegid(0)
    assert list(directory.iterdir()) == []
    shutil.rmtree(outer)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to hand a file to another user")
def test_a_directory_held_by_another_users_server_is_refused(tmp_path: Path) -> None:
    directory = tmp_path / "shared"
    directory.mkdir()
    lock = directory / "server.lock"
    lock.touch()
    os.chown(lock, 65534, 65534)
    with pytest.raises(
        ConfigurationError,
        match=rf"'{directory}' is held by a server of another user \(nobody, uid 65534\)",
    ):
        ctxstore.connect(f"local://{directory}")
    assert sorted(path.name for path in directory.iterdir()) == ["server.lock"]


def test_no_server_binary_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(binaries, "embedded_valkey_server", lambda: None)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv(binaries.ENV_SERVER, raising=False)
    with pytest.raises(ConfigurationError, match=r"pip install 'ctxstore\[local\]'"):
        ctxstore.connect(f"local://{tmp_path / 'data'}")
    assert list((tmp_path / "data").iterdir()) == []


def test_a_bad_server_binary_variable_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(binaries.ENV_SERVER, str(tmp_path / "nope"))
    with pytest.raises(ConfigurationError, match="CTXSTORE_LOCAL_SERVER"):
        ctxstore.connect(f"local://{tmp_path / 'data'}")


def test_the_binary_is_the_wheels_valkey_then_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(binaries.ENV_SERVER, raising=False)
    wheel = binaries.embedded_valkey_server()
    if wheel is not None:
        assert binaries.server_binary() == wheel
    monkeypatch.setattr(binaries, "embedded_valkey_server", lambda: None)
    fake = tmp_path / "redis-server"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert binaries.server_binary() == str(fake)
    valkey = tmp_path / "valkey-server"
    valkey.write_text("#!/bin/sh\n")
    valkey.chmod(0o755)
    assert binaries.server_binary() == str(valkey)


def test_a_server_that_cannot_start_is_reported_with_its_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A binary that exits at once: the caller hears why, not a hang."""
    broken = tmp_path / "broken-server"
    broken.write_text("#!/bin/sh\necho 'bad config line' >> server.log\nexit 7\n")
    broken.chmod(0o755)
    monkeypatch.setenv(binaries.ENV_SERVER, str(broken))
    store = ctxstore.connect(f"local://{tmp_path / 'data'}")
    with pytest.raises(ctxstore.BackendUnavailableError, match="exited with status 7: bad config"):
        store.upsert_chat("c", user_id="u")


def test_the_server_runs_with_a_socket_only_an_append_only_file_and_no_eviction() -> None:
    command = server_command("valkey-server", Path("/data"))
    options = dict(zip(command[1::2], command[2::2], strict=True))
    assert options["--port"] == "0"
    assert options["--unixsocketperm"] == "700"
    assert options["--appendonly"] == "yes"
    assert options["--appendfsync"] == "everysec"
    assert options["--maxmemory-policy"] == "noeviction"
    assert options["--save"] == ""
    assert [poll_interval(600), poll_interval(20), poll_interval(0.5)] == [5.0, 2.0, 0.05]


def test_redis_server_on_path_serves_too_but_not_durability_aof(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Debian's redis-server 7.0 (no WAITAOF): local:// runs on it, and durability="aof" is a
    ConfigurationError before anything is written."""
    found = shutil.which("redis-server")
    if found is None:
        pytest.skip("redis-server is not on PATH")
    monkeypatch.setenv(binaries.ENV_SERVER, found)
    directory = tmp_path / "data"
    try:
        store = ctxstore.connect(f"local://{directory}?idle=30")
        store.upsert_chat("c", user_id="u")
        status = LocalServer(place_of(str(directory), create=False)).status()
        assert status is not None
        assert status.server.startswith("redis 7.")
        durable = ctxstore.connect(f"local://{directory}", durability="aof")
        with pytest.raises(ConfigurationError, match="WAITAOF"):
            durable.upsert_chat("d", user_id="u")
        assert store.get_chat("c", user_id="u").user_id == "u"
        with pytest.raises(ctxstore.ChatNotFoundError):
            store.get_chat("d", user_id="u")
        store.close()
        durable.close()
    finally:
        LocalServer(place_of(str(directory), create=False)).stop()


def test_local_status_and_stop_from_the_command_line(
    local_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    require_local_binary()
    local_dir.mkdir()
    assert main(["local", "status", str(local_dir)]) == 3
    assert capsys.readouterr().out == f"not running: {local_dir}\n"
    assert main(["local", "stop", str(local_dir)]) == 0
    assert capsys.readouterr().out == f"not running: {local_dir}\n"
    store = ctxstore.connect(f"local://{local_dir}?idle=60")
    store.upsert_chat("c", user_id="u")  # the store's connections stay open
    assert main(["local", "status", f"local://{local_dir}"]) == 0
    shown = capsys.readouterr().out
    assert f"running: {local_dir}" in shown
    assert "stops    after 60 s idle" in shown
    assert re.search(r"clients  [1-9]\n", shown)
    store.close()  # its connections close: the keeper's and the status's own are not counted
    assert main(["local", "status", str(local_dir), "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["running"] is True
    assert status["clients"] == 0
    assert status["socket"] == str(local_dir / "ctxstore.sock")
    assert status["used_memory"] > 0
    assert main(["local", "stop", str(local_dir)]) == 0
    assert capsys.readouterr().out == f"stopped: {local_dir} (pid {status['pid']})\n"
    assert not LocalServer(place_of(str(local_dir), create=False)).running()
    assert main(["local", "status", str(local_dir), "--json"]) == 3
    assert json.loads(capsys.readouterr().out) == {"running": False}
    assert starts_logged(local_dir) == 1


def test_local_needs_a_posix_system(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "name", "nt")
    with pytest.raises(ConfigurationError, match="local:// needs a POSIX system"):
        ctxstore.connect("local://./anywhere")
    assert main(["local", "status", "./anywhere"]) == 1


def test_the_command_line_loads_the_local_store_only_when_asked() -> None:
    """``ctxstore`` works where local:// cannot (its modules need fcntl and pwd)."""
    code = (
        "import sys; from ctxstore.cli.main import build_parser; build_parser(); "
        "print(any(name.startswith('ctxstore.store.local') for name in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "False"
