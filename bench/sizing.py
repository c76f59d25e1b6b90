"""What it costs to run ctxstore: the figures of docs/sizing.md, measured on a private
redis-server.

    python bench/sizing.py [--chats 200] [--messages 50] [--streams 100,1000] [--json PATH]

* **Memory**: the bytes one more empty chat, message, branch, checkpoint and summary adds, as
  ``MEMORY USAGE ... SAMPLES 0`` summed over the namespace's keys (the chats' keys and the
  namespace's indexes) and as the server's ``used_memory`` (allocator overhead included), each
  the difference between two states divided by how many were added. Messages are 200
  characters of text (a short chat turn), counted with the default counter.
* **Redis CPU** per save (one message, ``store.append``) and per read (``load_branch`` of 50
  messages from a process that has not read the chat: the full read), from the server's
  ``used_cpu_user + used_cpu_sys`` over thousands of calls: what a shard spends, its event loop
  and network included; beside it the scripts' own time (``INFO commandstats``).
* **Streamed answers**: N answers (``achat()`` with a model stub that sends a chunk every 20
  ms, 60 chunks each) streaming at once from one client process: the server's CPU per answer
  and in total, the scripts a second Redis ran, and the client's CPU per chunk (``time.
  process_time``, every layer: the UI message stream, the mirror into Redis, the saves).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from local_redis import local_redis
from redis_info import command_stats, used_memory

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import ctxstore  # noqa: E402

TEXT = ("The tram climbs to the castle while the river turns below the old town. " * 3)[:200]


@dataclass
class Bytes:
    """Bytes one more of something adds: by the keys' MEMORY USAGE and by used_memory."""

    keys: float
    used_memory: float


def key_bytes(client: Any, namespace: str) -> int:
    total = 0
    for key in client.scan_iter(match=f"ctx:{namespace}:*", count=1_000):
        total += int(client.memory_usage(key, samples=0) or 0)
    return total


class Meter:
    """The namespace's key bytes and the server's used_memory, read before and after."""

    def __init__(self, client: Any, namespace: str) -> None:
        self.client, self.namespace = client, namespace
        self.last = self.read()

    def read(self) -> tuple[int, int]:
        return key_bytes(self.client, self.namespace), used_memory(self.client)

    def per(self, count: int) -> Bytes:
        now = self.read()
        keys, used = now[0] - self.last[0], now[1] - self.last[1]
        self.last = now
        return Bytes(keys / count, used / count)


def memory(url: str, client: Any, chats: int, messages: int) -> dict[str, Bytes]:
    namespace = f"mem{time.time_ns()}"
    store = ctxstore.connect(url, namespace=namespace, cache_bytes=0)
    alice = store.for_user("alice")
    found: dict[str, Bytes] = {}
    meter = Meter(client, namespace)
    ids = [f"chat-{n:05d}" for n in range(chats)]
    for chat_id in ids:
        alice.upsert_chat(chat_id)
    found["empty chat"] = meter.per(chats)
    heads: dict[str, str] = {}
    for chat_id in ids:
        head = None
        for _ in range(messages):
            message = [{"role": "user", "content": TEXT}]
            head = alice.append(chat_id, "main", message, expected_head=head).head_message_id
        assert head is not None
        heads[chat_id] = head
    found["message"] = meter.per(chats * messages)
    for chat_id in ids:
        alice.create_branch(chat_id, heads[chat_id], name="side", activate=False)
    found["branch"] = meter.per(chats)
    for chat_id in ids:
        alice.upsert_checkpoint(chat_id, "before-edit", heads[chat_id])
    found["checkpoint"] = meter.per(chats)
    for chat_id in ids:
        alice.write_summary(chat_id, heads[chat_id], TEXT, tokens=40)
    found["summary of 200 characters"] = meter.per(chats)
    store.close()
    return found


def server_cpu(client: Any) -> float:
    info = client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


@dataclass
class Cpu:
    """Redis CPU per call (process time, µs) and its scripts' own time per call (µs)."""

    server_us: float
    scripts_us: float
    calls: int


def per_call(client: Any, count: int, work: Any) -> Cpu:
    stats, cpu = command_stats(client), server_cpu(client)
    work()
    after_stats, after_cpu = command_stats(client), server_cpu(client)
    scripts = after_stats.server_usec() - stats.server_usec()
    return Cpu((after_cpu - cpu) * 1e6 / count, scripts / count, count)


def saves_and_reads(url: str, client: Any, count: int) -> dict[str, Cpu]:
    namespace = f"cpu{time.time_ns()}"
    store = ctxstore.connect(url, namespace=namespace)
    alice = store.for_user("alice")
    alice.upsert_chat("c")
    heads = {"head": None}

    def save() -> None:
        head = heads["head"]
        message = [{"role": "user", "content": TEXT}]
        for _ in range(count):
            head = alice.append("c", "main", message, expected_head=head).head_message_id
        heads["head"] = head

    found = {"save (store.append, 1 message)": per_call(client, count, save)}
    chats = [f"r{n}" for n in range(count // 50)]
    for chat_id in chats:
        alice.upsert_chat(chat_id)
        head = None
        for _ in range(50):
            message = [{"role": "user", "content": TEXT}]
            head = alice.append(chat_id, "main", message, expected_head=head).head_message_id
    store.close()
    uncached = ctxstore.connect(url, namespace=namespace, cache_bytes=0)
    cold = uncached.for_user("alice")

    def read() -> None:
        for _ in range(5):
            for chat_id in chats:
                cold.load_branch(chat_id)

    found["read (load_branch of 50, not cached)"] = per_call(client, len(chats) * 5, read)
    uncached.close()
    return found


@dataclass
class Streaming:
    answers: int
    chunks: int
    wall_s: float
    server_cpu_s: float
    server_cpu_per_answer_ms: float
    server_busy: float
    scripts_per_s: float
    client_cpu_per_chunk_us: float


class PacedModel:
    """``litellm.acompletion`` for the streams: ``pieces`` text chunks ``delay`` apart."""

    def __init__(self, pieces: int, delay: float) -> None:
        self.pieces, self.delay = pieces, delay

    async def acompletion(self, **request: Any) -> Any:
        if not request.get("stream"):
            return {"choices": [{"message": {"role": "assistant", "content": "A title"}}]}
        return self._chunks()

    async def _chunks(self) -> Any:
        for number in range(self.pieces):
            await asyncio.sleep(self.delay)
            delta = {"content": f"word{number} "}
            yield {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
        yield {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
        usage = {"prompt_tokens": 20, "completion_tokens": self.pieces, "total_tokens": 80}
        yield {"choices": [], "usage": usage}


async def streams(url: str, client: Any, answers: int, pieces: int, delay: float) -> Streaming:
    import litellm

    model = PacedModel(pieces, delay)
    original = litellm.acompletion
    litellm.acompletion = model.acompletion
    namespace = f"stream{time.time_ns()}"
    store = ctxstore.connect_async(url, namespace=namespace)
    question = {"id": "q", "role": "user", "parts": [{"type": "text", "text": "Tell me."}]}

    async def answer(number: int) -> int:
        engine = ctxstore.AsyncContextEngine(store=store, chat_id=f"c{number}", user_id="alice")
        stream = await ctxstore.achat(engine, [question], model="gpt-4o-mini")
        return sum([1 async for _chunk in stream])

    try:
        await asyncio.gather(*(answer(n) for n in range(min(answers, 20))))  # warm
        stats, cpu = command_stats(client), server_cpu(client)
        started, process = time.perf_counter(), time.process_time()
        chunks = sum(await asyncio.gather(*(answer(n + 100_000) for n in range(answers))))
        wall, process = time.perf_counter() - started, time.process_time() - process
        after_stats, after_cpu = command_stats(client), server_cpu(client)
    finally:
        litellm.acompletion = original
        await store.close()
    used = after_cpu - cpu
    scripts = after_stats.script_calls() - stats.script_calls()
    return Streaming(
        answers=answers,
        chunks=chunks,
        wall_s=wall,
        server_cpu_s=used,
        server_cpu_per_answer_ms=used * 1e3 / answers,
        server_busy=used / wall,
        scripts_per_s=scripts / wall,
        client_cpu_per_chunk_us=process * 1e6 / chunks,
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chats", type=int, default=200)
    parser.add_argument("--messages", type=int, default=50)
    parser.add_argument("--calls", type=int, default=3_000)
    parser.add_argument("--streams", default="100,1000")
    parser.add_argument("--pieces", type=int, default=60)
    parser.add_argument("--json", type=Path)
    options = parser.parse_args()
    python = platform.python_version()
    report: dict[str, Any] = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{os.cpu_count()} vCPUs, {platform.platform()}, Python {python}",
    }
    with local_redis() as server:
        client = server.client()
        report["redis"] = server.version
        stored = memory(server.url, client, options.chats, options.messages)
        report["memory"] = {name: asdict(found) for name, found in stored.items()}
        calls = saves_and_reads(server.url, client, options.calls)
        report["cpu"] = {name: asdict(found) for name, found in calls.items()}
        report["streams"] = [
            asdict(asyncio.run(streams(server.url, client, int(n), options.pieces, 0.02)))
            for n in options.streams.split(",")
        ]
        client.close()
    print(json.dumps(report, indent=2))
    if options.json is not None:
        options.json.write_text(json.dumps(report, indent=2) + "\n")
    print(
        "\n".join(
            f"{name}: {found['keys']:.0f} B (keys), {found['used_memory']:.0f} B (used_memory)"
            for name, found in report["memory"].items()
        ),
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
