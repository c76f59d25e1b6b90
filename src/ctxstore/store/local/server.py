"""The private server of one ``local://`` directory: started on first use, joined afterwards,
restarted from its append-only file after a crash, stopped on request or when idle.

:meth:`LocalServer.ensure` is what a connection calls when the socket does not answer (see
:mod:`ctxstore.store.local.connections`), so a client never checks anything while the server
is up, and the first connection after a crash or an idle stop starts it again. Starting runs
:mod:`ctxstore.store.local.keeper` in a process of its own, which outlives the caller: other
processes may be using the server.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ctxstore.errors import BackendError, BackendUnavailableError
from ctxstore.store.local.binary import server_binary
from ctxstore.store.local.locks import exclusively, is_held
from ctxstore.store.local.place import Place

#: Seconds a server may run with no client connected before it stops by itself.
DEFAULT_IDLE_TIMEOUT = 600.0
#: How long a caller waits for another process that is starting the server.
START_WAIT_SECONDS = 300.0
#: How long a server that no longer answers may take to exit before a new one is started.
EXIT_WAIT_SECONDS = 30.0
#: The client name of ctxstore's own short connections (not counted as clients by ``status``).
CONTROL_CLIENT = "ctxstore-control"


class LocalServer:
    """Start, join, inspect and stop the server of one local store directory."""

    def __init__(self, place: Place, *, idle_timeout: float = DEFAULT_IDLE_TIMEOUT) -> None:
        self.place = place
        self.idle_timeout = idle_timeout

    def running(self) -> bool:
        """Whether a server holds the directory (it may still be loading its data)."""
        return is_held(self.place.server_lock)

    def ensure(self) -> None:
        """Return once the directory's server answers, starting it when none runs."""
        with exclusively(
            self.place.start_lock, within=START_WAIT_SECONDS, doing="starting its server"
        ):
            if self._answers():
                return
            if self.running():
                self._wait_for_exit()
                if self._answers():
                    return
            self._launch()

    def status(self) -> LocalStatus | None:
        """What runs in the directory (None when no server does, or when the one found there
        exits while it is asked: one that is shutting down no longer answers)."""
        import redis

        deadline = time.monotonic() + EXIT_WAIT_SECONDS
        while self.running():
            try:
                with _Control(self.place) as client:
                    server = client.info("server")
                    memory = client.info("memory")
                    clients = client.client_list()
                return self._status(server, memory, clients)
            except redis.BusyLoadingError:  # a ConnectionError to redis-py: caught first
                time.sleep(0.05)
            except (redis.ConnectionError, redis.TimeoutError, OSError) as error:
                if time.monotonic() >= deadline:
                    raise BackendUnavailableError(
                        f"the server of {str(self.place.directory)!r} holds the directory but "
                        f"does not answer: {error}"
                    ) from error
                time.sleep(0.02)
        return None

    def _status(
        self, server: dict[str, Any], memory: dict[str, Any], clients: list[dict[str, Any]]
    ) -> LocalStatus:
        info = self._read_info()
        ours = {CONTROL_CLIENT, info.get("keeper_client", "")}
        return LocalStatus(
            directory=str(self.place.directory),
            socket=str(self.place.socket_file),
            pid=int(server.get("process_id", info.get("pid", 0))),
            server=_server_name(server),
            binary=str(info.get("binary", "")),
            used_memory=int(memory.get("used_memory", 0)),
            used_memory_human=str(memory.get("used_memory_human", "")),
            clients=sum(1 for entry in clients if entry.get("name") not in ours),
            uptime_seconds=int(server.get("uptime_in_seconds", 0)),
            idle_timeout=float(info.get("idle_timeout", 0)),
        )

    def stop(self) -> int | None:
        """Shut the server down (it writes out its append-only file first); the pid it had, or
        None when none ran."""
        status = self.status()
        if status is None:
            return None
        import redis

        try:
            with _Control(self.place) as client:
                client.execute_command("SHUTDOWN")
        except redis.ConnectionError:
            pass  # the server closes the connection as it exits: the usual reply to SHUTDOWN
        except redis.ResponseError as error:
            raise BackendError(
                f"the server of {str(self.place.directory)!r} refused to shut down: {error}"
            ) from error
        self._wait_for_exit()
        return status.pid

    # --- starting ----------------------------------------------------------------------------

    def _answers(self) -> bool:
        """True once the socket answers PING; waits while the server loads its data."""
        import redis

        while True:
            try:
                with _Control(self.place) as client:
                    return bool(client.ping())
            except redis.BusyLoadingError:
                time.sleep(0.05)
            except (redis.ConnectionError, redis.TimeoutError, OSError):
                return False

    def _wait_for_exit(self) -> None:
        """Wait for a server that holds the directory but does not answer to exit (one that a
        crash, an idle stop or ``local stop`` is ending); refuse to start a second one."""
        deadline = time.monotonic() + EXIT_WAIT_SECONDS
        while self.running():
            if time.monotonic() >= deadline:
                pid = self._read_info().get("pid", "?")
                raise BackendUnavailableError(
                    f"the server of {str(self.place.directory)!r} (pid {pid}) holds the "
                    f"directory but has not answered for {EXIT_WAIT_SECONDS:g} s"
                )
            if self._answers():
                return
            time.sleep(0.02)

    def _launch(self) -> None:
        """Run the keeper, which starts the server and returns once it answers."""
        command = [
            sys.executable,
            "-m",
            "ctxstore.store.local.keeper",
            str(self.place.directory),
            server_binary(),
            repr(self.idle_timeout),
        ]
        try:
            done = subprocess.run(
                command,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=START_WAIT_SECONDS,
                env=_keeper_environment(),
                check=False,
            )
        except subprocess.TimeoutExpired as error:
            raise BackendUnavailableError(
                f"the server of {str(self.place.directory)!r} did not answer within "
                f"{START_WAIT_SECONDS:g} s; see {str(self.place.log_file)!r}"
            ) from error
        if done.returncode != 0:
            reason = (done.stdout + done.stderr).strip().splitlines()
            raise BackendUnavailableError(
                f"the server of {str(self.place.directory)!r} did not start: "
                + (reason[-1] if reason else f"exit status {done.returncode}")
            )

    def _read_info(self) -> dict[str, Any]:
        try:
            loaded = json.loads(self.place.info_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return loaded if isinstance(loaded, dict) else {}


@dataclass(frozen=True)
class LocalStatus:
    """What ``ctxstore local status`` shows of a running server."""

    directory: str
    socket: str
    pid: int
    server: str
    binary: str
    used_memory: int
    used_memory_human: str
    clients: int
    uptime_seconds: int
    idle_timeout: float


def _server_name(info: dict[str, Any]) -> str:
    """``valkey 8.1.1`` or ``redis 7.0.15``: Valkey says ``valkey_version`` (its
    ``redis_version`` names the Redis release it is compatible with)."""
    if "valkey_version" in info:
        return f"valkey {info['valkey_version']}"
    return f"{info.get('server_name') or 'redis'} {info.get('redis_version', '?')}"


class _Control:
    """A short connection of ctxstore's own to the directory's socket: no retries, a client
    name :meth:`LocalServer.status` leaves out of its count."""

    def __init__(self, place: Place) -> None:
        import redis
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        self._client = redis.Redis(
            unix_socket_path=place.socket_path(),
            socket_timeout=5.0,
            socket_connect_timeout=2.0,
            retry=Retry(NoBackoff(), 0),
            client_name=CONTROL_CLIENT,
            protocol=2,
        )

    def __enter__(self) -> Any:
        return self._client

    def __exit__(self, *_exc: object) -> None:
        self._client.close()


def _keeper_environment() -> dict[str, str]:
    """This environment, with the folder ctxstore was imported from first on the keeper's
    path: a process that found ctxstore through its own ``sys.path`` starts a keeper that
    finds the same code."""
    environment = dict(os.environ)
    package_root = str(Path(__file__).resolve().parents[3])
    existing = environment.get("PYTHONPATH")
    environment["PYTHONPATH"] = (
        package_root if not existing else os.pathsep.join((package_root, existing))
    )
    return environment
