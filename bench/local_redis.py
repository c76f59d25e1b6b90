"""A private redis-server for one benchmark run, on a free loopback port.

The benchmark never uses a Redis it did not start: a shared server mixes other clients' load into
the figures, and the run writes freely. Persistence is off so that no fork or disk write lands
inside a timed loop.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import redis

HOST = "127.0.0.1"


@dataclass(frozen=True)
class LocalRedis:
    """A running server: where it listens and which version it is."""

    port: int
    version: str

    @property
    def url(self) -> str:
        return f"redis://{HOST}:{self.port}"

    def client(self) -> redis.Redis:
        """A plain client for INFO and CONFIG, separate from the stores being measured."""
        return redis.Redis(host=HOST, port=self.port)


def _port_free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind((HOST, port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A loopback port nobody listens on now, whose cluster bus port (+10000) is free too."""
    while True:
        with socket.socket() as probe:
            probe.bind((HOST, 0))
            port = int(probe.getsockname()[1])
        if port + 10_000 < 65_536 and _port_free(port + 10_000):
            return port


def _spawn(
    binary: str, port: int, directory: Path, extra: tuple[str, ...]
) -> subprocess.Popen[bytes]:
    command = [
        binary,
        "--port", str(port),
        "--bind", HOST,
        "--save", "",
        "--appendonly", "no",
        "--dir", str(directory),
        "--logfile", str(directory / "redis.log"),
        *extra,
    ]  # fmt: skip
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _wait_until_ready(process: subprocess.Popen[bytes], port: int, timeout: float = 10.0) -> bool:
    """True once the server answers PING; False if it exits or stays silent (port taken)."""
    client = redis.Redis(host=HOST, port=port)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                return False
            try:
                return bool(client.ping())
            except redis.ConnectionError:
                time.sleep(0.05)
        return False
    finally:
        client.close()


def stop(process: subprocess.Popen[bytes]) -> None:
    """Terminate a server this run started (and only that one), killing it if it hangs."""
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def server_version(port: int) -> str:
    client = redis.Redis(host=HOST, port=port)
    try:
        return str(client.info("server")["redis_version"])
    finally:
        client.close()


def redis_server_binary() -> str:
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("redis-server is not on PATH; the benchmark needs it")
    return binary


def start_server(
    directory: Path, *extra: str, attempts: int = 5
) -> tuple[subprocess.Popen[bytes], int]:
    """Start one ``redis-server`` in ``directory``; returns the process and its port.

    A port picked free can be taken before the server binds it, so a failed start is retried on
    a new port.
    """
    binary = redis_server_binary()
    directory.mkdir(parents=True, exist_ok=True)
    for _attempt in range(attempts):
        port = free_port()
        process = _spawn(binary, port, directory, extra)
        if _wait_until_ready(process, port):
            return process, port
        stop(process)
    raise SystemExit(f"could not start redis-server (log in {directory})")


@contextmanager
def local_redis() -> Iterator[LocalRedis]:
    """Start ``redis-server`` in a temporary directory, yield it, and stop it afterwards."""
    with tempfile.TemporaryDirectory(prefix="ctxstore-bench-") as folder:
        process, port = start_server(Path(folder))
        try:
            yield LocalRedis(port, server_version(port))
        finally:
            stop(process)
