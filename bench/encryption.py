"""What encryption at rest costs: a save, a warm read and a cold read with ``encryption=`` on,
as ratios to the same without it, interleaved in one run on one redis-server (client and
server pinned to one CPU); and Redis memory per message, sealed and in the clear.

    .venv/bin/python bench/encryption.py [REDIS_URL]   # default: a redis-server it starts

A save is one ``append`` of a 200-character message onto the head; a warm read is
``load_branch`` of a 1,000-message chat after one more message was saved by another process
(its cache holds the rest); a cold read is ``load_branch`` of that chat by a store without a
cache. Each figure is the median of ``ROUNDS`` rounds, the two modes in turn (each goes first
every other round). ``migrate --encrypt`` of a chat is timed against importing its export
sealed, the same run.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import ctxstore
from ctxstore.crypto import LocalKeyProvider

from local_redis import local_redis
from pinning import pin_to_one_cpu

ROUNDS = 9
SAVES = 300
READS = 60
LENGTH = 1000
TEXT = "x" * 200


def timed(repeat: int, call: Callable[[], Any]) -> float:
    """Median microseconds of ``call`` over ``repeat`` calls."""
    found = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        found.append(time.perf_counter() - started)
    return statistics.median(found) * 1e6


class Mode:
    """One side of the comparison: a store, a cache-less reader, a second writer, one chat."""

    def __init__(self, url: str, provider: Any, label: str) -> None:
        namespace = f"benchenc{label}{time.time_ns()}"
        options = {"namespace": namespace, "estimate_tokens": len, "encryption": provider}
        self.base = ctxstore.connect(url, **options)
        self.store = self.base.for_user("u")
        self.cold = ctxstore.connect(url, cache_bytes=0, **options).for_user("u")
        self.other = ctxstore.connect(url, cache_bytes=0, **options).for_user("u")
        self.store.upsert_chat("c")
        head = None
        for start in range(0, LENGTH, 500):
            batch = [{"role": "user", "content": f"{n} {TEXT}"} for n in range(start, start + 500)]
            head = self.store.append("c", "main", batch, expected_head=head).head_message_id
        self.head = head
        self.store.upsert_chat("saves")
        self.save_head: str | None = None
        self.client = self.base.client
        self.namespace = namespace

    def save(self) -> None:
        self.save_head = self.store.append(
            "saves", "main", [{"role": "user", "content": TEXT}], expected_head=self.save_head
        ).head_message_id

    def warm_read(self) -> float:
        self.store.load_branch("c")
        self.head = self.other.append(
            "c", "main", [{"role": "user", "content": TEXT}], expected_head=self.head
        ).head_message_id
        started = time.perf_counter()
        self.store.load_branch("c")
        return (time.perf_counter() - started) * 1e6

    def cold_read(self) -> None:
        self.cold.load_branch("c")

    def decrypt_floor(self) -> float:
        """Microseconds to AES-GCM-decrypt the chain's payloads in a bare loop (the cipher
        alone, each with its associated data made beforehand): what no implementation of
        per-record sealing avoids."""
        import msgpack

        from ctxstore._core.format.sealed import PAYLOAD, ChatSeal

        key = f"ctx:{self.namespace}:{{c}}:log"
        values = [msgpack.unpackb(raw)[2] for raw in self.client.lrange(key, 0, -1)]
        if type(values[0]) is not bytes:
            return 0.0
        keys = self.base.state.caches.data_keys.get("u")
        assert keys is not None
        assert keys.current is not None
        incarnation = self.store.get_chat("c").incarnation
        seal = ChatSeal(keys, self.namespace, "c", incarnation)
        header = keys.current.header
        size = len(header)
        decrypt, _refused = keys.current.raw_decrypt()
        bound = [header + seal.aad(PAYLOAD, index, index - 1) for index in range(len(values))]
        started = time.perf_counter()
        for value, aad in zip(values, bound, strict=True):
            decrypt(value[size : size + 12], value[size + 12 :], aad)
        return (time.perf_counter() - started) * 1e6

    def bytes_per_message(self) -> float:
        key = f"ctx:{self.namespace}:{{c}}:log"
        return int(self.client.memory_usage(key, samples=0)) / int(self.client.llen(key))


def main() -> None:
    print(pin_to_one_cpu())
    if len(sys.argv) > 1:
        compare(sys.argv[1])
        return
    with local_redis() as server:
        compare(server.url)


def compare(url: str) -> None:
    """Both modes on ``url``, interleaved; prints the figures."""
    provider = LocalKeyProvider.from_keys({"kek-bench": os.urandom(32)}, current="kek-bench")
    modes = {"plain": Mode(url, None, "plain"), "sealed": Mode(url, provider, "sealed")}
    found: dict[str, dict[str, list[float]]] = {
        name: {"save": [], "warm read": [], "cold read": []} for name in modes
    }
    for number in range(ROUNDS):
        order = list(modes) if number % 2 == 0 else list(reversed(modes))
        for name in order:
            mode = modes[name]
            found[name]["save"].append(timed(SAVES, mode.save))
            found[name]["warm read"].append(
                statistics.median(mode.warm_read() for _ in range(READS))
            )
            found[name]["cold read"].append(timed(READS // 4, mode.cold_read))
            found[name].setdefault("decrypt floor", []).append(
                statistics.median(mode.decrypt_floor() for _ in range(5))
            )
    for figure in ("save", "warm read", "cold read"):
        plain = statistics.median(found["plain"][figure])
        sealed = statistics.median(found["sealed"][figure])
        print(
            f"{figure:10s} plain {plain:8.1f} us  sealed {sealed:8.1f} us  "
            f"ratio {sealed / plain:.2f}x"
        )
    floor = statistics.median(found["sealed"]["decrypt floor"])
    cold = statistics.median(found["plain"]["cold read"])
    print(
        f"AES-GCM alone on the {LENGTH + ROUNDS * READS} payloads of the cold read: "
        f"{floor:.0f} us: a cold read's floor with encryption is {(cold + floor) / cold:.2f}x"
    )
    migration(url, provider)
    plain_bytes = modes["plain"].bytes_per_message()
    sealed_bytes = modes["sealed"].bytes_per_message()
    print(
        f"memory per message of {len(TEXT) + 4} characters: plain {plain_bytes:.0f} B, "
        f"sealed {sealed_bytes:.0f} B (+{sealed_bytes - plain_bytes:.0f} B, "
        f"{sealed_bytes / plain_bytes:.2f}x)"
    )


def migration(url: str, provider: Any) -> None:
    """``migrate(encrypt=True)`` sealing one chat of ``LENGTH`` messages in the clear, against
    doing it by hand in the same run: its plain export imported by a store with encryption
    (every record read, sealed and written, in the same chunks)."""
    sealing, by_hand = [], []
    for number in range(5):
        namespace = f"benchmig{number}{time.time_ns()}"
        plain = ctxstore.connect(url, namespace=namespace, estimate_tokens=len).admin()
        plain.open_chat("c", "u")
        head = None
        for start in range(0, LENGTH, 500):
            batch = [{"role": "user", "content": f"{n} {TEXT}"} for n in range(start, start + 500)]
            head = plain.append("c", "main", batch, expected_head=head).head_message_id
        sealed = ctxstore.connect(
            url, namespace=namespace, estimate_tokens=len, encryption=provider
        ).admin()
        exported = list(plain.export_chat("c"))
        started = time.perf_counter()
        sealed.import_chat(exported, chat_id="copy")
        by_hand.append(time.perf_counter() - started)
        started = time.perf_counter()
        report = sealed.migrate(encrypt=True)
        sealing.append(time.perf_counter() - started)
        assert report.sealed == 1, report
        plain.close()
        sealed.close()
    seal_ms, hand_ms = statistics.median(sealing) * 1e3, statistics.median(by_hand) * 1e3
    print(
        f"migrate --encrypt of a {LENGTH}-message chat: {seal_ms:.1f} ms "
        f"({seal_ms * 1e3 / LENGTH:.1f} us a message); its export imported sealed: "
        f"{hand_ms:.1f} ms; ratio {seal_ms / hand_ms:.2f}x"
    )


if __name__ == "__main__":
    main()
