"""A private 3-master Redis Cluster for the cluster scenarios, on free loopback ports.

Same rules as :mod:`local_redis`: servers this run starts itself, persistence off, stopped at
the end. ``redis-cli --cluster create`` assigns the slots; the run waits for
``cluster_state:ok`` on every node before using it.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import redis

from local_redis import HOST, start_server, stop

MASTERS = 3


@dataclass(frozen=True)
class LocalCluster:
    """A running cluster: its nodes' ports; the first is the seed of the URL."""

    ports: tuple[int, ...]

    @property
    def url(self) -> str:
        return f"redis+cluster://{HOST}:{self.ports[0]}"


def _cluster_ok(port: int) -> bool:
    client = redis.Redis(host=HOST, port=port)
    try:
        info = client.execute_command("CLUSTER", "INFO")  # type: ignore[no-untyped-call]
    finally:
        client.close()
    text = info.decode() if isinstance(info, bytes) else str(info)
    return "cluster_state:ok" in text


def _wait_for_cluster(ports: tuple[int, ...], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(_cluster_ok(port) for port in ports):
            return
        time.sleep(0.1)
    raise RuntimeError("the benchmark cluster did not reach cluster_state:ok")


@contextmanager
def local_cluster() -> Iterator[LocalCluster]:
    """Start three cluster-enabled servers, join them with redis-cli, yield, stop them."""
    cli = shutil.which("redis-cli")
    if cli is None:
        raise RuntimeError("redis-cli is not on PATH; it creates the benchmark cluster")
    processes: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory(prefix="ctxstore-bench-cluster-") as folder:
        try:
            ports = []
            for index in range(MASTERS):
                node = Path(folder) / f"node{index}"
                process, port = start_server(
                    node,
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    str(node / "nodes.conf"),
                    "--cluster-node-timeout",
                    "5000",
                )
                processes.append(process)
                ports.append(port)
            subprocess.run(
                [
                    cli,
                    "--cluster",
                    "create",
                    *(f"{HOST}:{port}" for port in ports),
                    "--cluster-replicas",
                    "0",
                    "--cluster-yes",
                ],
                check=True,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=60,
            )
            _wait_for_cluster(tuple(ports))
            yield LocalCluster(tuple(ports))
        finally:
            for process in processes:
                stop(process)
