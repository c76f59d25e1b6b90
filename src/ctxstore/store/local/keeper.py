"""The keeper of a ``local://`` server: starts it, reports when it answers, stops it when idle.

``python -m ctxstore.store.local.keeper DIRECTORY BINARY IDLE_SECONDS`` is run by
:meth:`~ctxstore.store.local.server.LocalServer.ensure` under the directory's start lock. It
forks: the parent waits for the child's word and exits (0 once the server answers, 1 with the
reason on stdout), so the caller gets a plain exit status and the child, in a session of its
own, outlives the caller without becoming its zombie. The child:

1. takes the directory's server lock and starts the server with that lock inherited (so the
   server, and only the server, holds it for as long as it lives: the keeper closes its own
   descriptor right after the start);
2. waits until the server answers ``PING`` (it may first load a large append-only file), then
   writes ``server.json`` and tells the parent;
3. every few seconds counts the server's clients (``INFO clients``, its own connection
   included); when no other client has been connected for ``IDLE_SECONDS`` it sends
   ``SHUTDOWN``, which writes out the append-only file; ``0`` keeps the server up. It exits
   when the server does, whatever ended it: the next use starts a new one, which loads the
   append-only file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ctxstore.store.local.locks import open_lock, take
from ctxstore.store.local.place import INFO_FILE, LOG_FILE, SERVER_LOCK, SOCKET_NAME, Place

KEEPER_CLIENT = "ctxstore-keeper"
#: How long the keeper waits for the server's first answer (loading a large file takes a while).
READY_SECONDS = 280.0


def server_command(binary: str, directory: Path) -> list[str]:
    """The server's command line: a unix socket only, an append-only file fsynced every second,
    no snapshots, no eviction (a dropped key would cut a chat's chains)."""
    return [
        binary,
        "--port", "0",
        "--unixsocket", SOCKET_NAME,
        "--unixsocketperm", "700",
        "--dir", str(directory),
        "--appendonly", "yes",
        "--appendfsync", "everysec",
        "--save", "",
        "--maxmemory-policy", "noeviction",
        "--daemonize", "no",
        "--logfile", LOG_FILE,
    ]  # fmt: skip


def poll_interval(idle_timeout: float) -> float:
    """Seconds between two client counts: a tenth of the idle timeout, within 0.05 to 5."""
    return min(5.0, max(0.05, idle_timeout / 10))


class Keeper:
    """The child process's work (see the module's docstring)."""

    def __init__(self, directory: Path, binary: str, idle_timeout: float) -> None:
        self.directory = directory
        self.binary = binary
        self.idle_timeout = idle_timeout
        self.server: subprocess.Popen[bytes] | None = None
        self._connection: Any = None

    def start(self) -> str:
        """Start the server; what to tell the parent ("ready ..." or the reason it failed)."""
        lock = open_lock(self.directory / SERVER_LOCK)
        try:
            if not take(lock, within=2.0):
                return "ready: a server already holds the directory"
            with open(self.directory / LOG_FILE, "ab") as log:
                self.server = subprocess.Popen(
                    server_command(self.binary, self.directory),
                    cwd=self.directory,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=log,
                    pass_fds=(lock,),
                )
        except OSError as error:
            return f"cannot run {self.binary!r}: {error.strerror or error}"
        finally:
            os.close(lock)  # the server holds the lock now (its inherited descriptor)
        reason = self._wait_ready()
        if reason is not None:
            return reason
        self._write_info()
        return f"ready: pid {self.server.pid}"

    def _wait_ready(self) -> str | None:
        import redis

        assert self.server is not None
        deadline = time.monotonic() + READY_SECONDS
        while time.monotonic() < deadline:
            code = self.server.poll()
            if code is not None:
                return f"the server exited with status {code}: {self._log_tail()}"
            try:
                if self._client().ping():
                    return None
            except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError, OSError):
                pass
            time.sleep(0.02)
        self.server.kill()
        return f"the server did not answer within {READY_SECONDS:g} s: {self._log_tail()}"

    def _client(self) -> Any:
        """The keeper's one connection (made on first use, without retries: the keeper polls)."""
        if self._connection is None:
            import redis
            from redis.backoff import NoBackoff
            from redis.retry import Retry

            self._connection = redis.Redis(
                unix_socket_path=Place(self.directory).socket_path(),
                socket_timeout=10.0,
                socket_connect_timeout=2.0,
                retry=Retry(NoBackoff(), 0),
                client_name=KEEPER_CLIENT,
                protocol=2,
            )
        return self._connection

    def _write_info(self) -> None:
        assert self.server is not None
        info = {
            "pid": self.server.pid,
            "keeper_pid": os.getpid(),
            "keeper_client": KEEPER_CLIENT,
            "binary": self.binary,
            "idle_timeout": self.idle_timeout,
            "started_at": time.time(),
        }
        spare = self.directory / f"{INFO_FILE}.{os.getpid()}"
        spare.write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
        os.replace(spare, self.directory / INFO_FILE)

    def _log_tail(self) -> str:
        try:
            lines = (self.directory / LOG_FILE).read_text(errors="replace").splitlines()
        except OSError:
            return "no log"
        return " | ".join(line.strip() for line in lines[-3:]) or "no log"

    def watch(self) -> None:
        """Until the server exits: stop it after ``idle_timeout`` seconds with no client."""
        import redis

        assert self.server is not None
        if self.idle_timeout <= 0:
            self.server.wait()
            return
        client = self._client()
        interval = poll_interval(self.idle_timeout)
        idle_since: float | None = None
        while True:
            try:
                self.server.wait(timeout=interval)
                return
            except subprocess.TimeoutExpired:
                pass
            try:
                others = int(client.info("clients")["connected_clients"]) - 1
            except (redis.RedisError, OSError, KeyError, ValueError):
                continue  # busy, or going away: the wait above notices an exit
            now = time.monotonic()
            if others > 0:
                idle_since = None
                continue
            idle_since = now if idle_since is None else idle_since
            if now - idle_since >= self.idle_timeout:
                self.log(f"no client for {self.idle_timeout:g} s: shutting the server down")
                try:
                    client.execute_command("SHUTDOWN")
                except (redis.ConnectionError, OSError):
                    pass  # the server closes the connection as it exits
                except redis.ResponseError as error:
                    self.log(f"SHUTDOWN refused: {error}")
                    idle_since = None

    def log(self, line: str) -> None:
        stamp = time.strftime("%d %b %Y %H:%M:%S")
        with open(self.directory / LOG_FILE, "a", encoding="utf-8") as log:
            log.write(f"{os.getpid()}:K {stamp} # {line}\n")


def main(argv: list[str]) -> int:
    directory, binary, idle = Path(argv[0]), argv[1], float(argv[2])
    read_end, write_end = os.pipe()
    if os.fork() != 0:  # the parent: relay the child's word
        os.close(write_end)
        with os.fdopen(read_end, encoding="utf-8") as word:
            message = word.read().strip()
        print(message or "the keeper exited before the server answered", flush=True)
        return 0 if message.startswith("ready") else 1
    os.close(read_end)
    os.setsid()  # no terminal: a Ctrl-C in the caller's shell does not reach the server
    _detach_standard_streams()
    keeper = Keeper(directory, binary, idle)
    try:
        message = keeper.start()
    except Exception as error:  # whatever it was, the parent must hear of it
        message = f"the keeper failed: {error!r}"
    os.write(write_end, message.encode("utf-8", "replace"))
    os.close(write_end)
    if keeper.server is None or not message.startswith("ready: pid"):
        return 1
    keeper.watch()
    keeper.log(f"the server exited with status {keeper.server.returncode}")
    return 0


def _detach_standard_streams() -> None:
    null = os.open(os.devnull, os.O_RDWR)
    for stream in (0, 1, 2):
        os.dup2(null, stream)
    os.close(null)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
