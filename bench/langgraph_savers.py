"""The LangGraph savers: round trips and time of one ``get_state``, one
``get_state_history(limit=10)`` and one turn after 20 four-step turns of a graph whose messages
are a ``DeltaChannel``, against ``langgraph-checkpoint-plainredis`` and the AWS ``ValkeySaver``
in the same run on one redis-server (the peers come with ``.[bench]``; one not installed is
left out); and Redis memory per thread after 20 turns, with ``add_messages`` and with
``DeltaChannel``.

    .venv/bin/python bench/langgraph_savers.py [REDIS_URL]   # default: a redis-server it starts

Round trips are counted at the socket: each ``sendall`` of a client to the server is one
request written, whose reply the client then waits for (a pipeline is one). Times are medians
of ``ROUNDS`` calls, the savers in turn. Memory is the sum of ``MEMORY USAGE`` of every key a
saver wrote for its thread, on a flushed database.
"""

from __future__ import annotations

import itertools
import socket
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any, TypedDict

import redis
from langgraph.channels.delta import DeltaChannel
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.graph.message import _messages_delta_reducer

import ctxstore
from ctxstore.integrations.langgraph import CtxStoreSaver

from local_redis import local_redis

TURNS = 20
ROUNDS = 15


class DeltaState(TypedDict):
    messages: Annotated[list[Any], DeltaChannel(_messages_delta_reducer)]


def graph_of(state_type: Any, saver: Any) -> Any:
    """Four supersteps a turn: four nodes in a row, each adding a message."""

    def step(name: str) -> Callable[[Any], dict[str, Any]]:
        return lambda state: {"messages": [("ai", f"{name}: {len(state['messages'])}")]}

    builder = StateGraph(state_type)
    names = ["plan", "search", "draft", "answer"]
    for name in names:
        builder.add_node(name, step(name))
    builder.add_edge(START, names[0])
    for before, after in itertools.pairwise(names):
        builder.add_edge(before, after)
    return builder.compile(checkpointer=saver)


class Sends:
    """Counts the requests written to the server's port (socket ``sendall`` calls)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.count = 0

    @contextmanager
    def counting(self) -> Iterator[None]:
        original = socket.socket.sendall
        port = self.port

        def sendall(sock: socket.socket, data: Any, *args: Any) -> Any:
            try:
                if sock.getpeername()[1] == port:
                    self.count += 1
            except OSError:
                pass
            return original(sock, data, *args)

        socket.socket.sendall = sendall  # type: ignore[method-assign]
        try:
            yield
        finally:
            socket.socket.sendall = original  # type: ignore[method-assign]


def savers(url: str) -> dict[str, Callable[[], Any]]:
    """Each saver's factory (ours, and each peer that is installed)."""
    made: dict[str, Callable[[], Any]] = {
        "ctxstore": lambda: CtxStoreSaver(ctxstore.connect(url, namespace="bench")),
    }
    try:
        from langgraph_checkpoint_plainredis import RedisSaver

        made["plainredis 0.1.0"] = lambda: RedisSaver(url=url)
    except ImportError:
        print("langgraph-checkpoint-plainredis is not installed: left out")
    try:
        import valkey
        from langgraph_checkpoint_aws import ValkeySaver

        made["aws ValkeySaver 1.2.6"] = lambda: ValkeySaver(valkey.Valkey.from_url(url))
    except ImportError:
        print("langgraph-checkpoint-aws is not installed: left out")
    return made


def measure(url: str, port: int, name: str, make: Callable[[], Any]) -> dict[str, Any]:
    admin = redis.Redis.from_url(url)
    admin.flushall()
    saver = make()
    sends = Sends(port)
    found: dict[str, Any] = {}
    for label, state_type in (("add_messages", MessagesState), ("DeltaChannel", DeltaState)):
        admin.flushall()
        graph = graph_of(state_type, saver)
        thread = {"configurable": {"thread_id": f"{name}-{label}"}}
        for turn in range(TURNS):
            graph.invoke({"messages": [("user", f"turn {turn}")]}, thread)
        found[f"memory/thread {label}"] = sum(
            int(admin.memory_usage(key, samples=0) or 0) for key in admin.scan_iter(count=1000)
        )
        if label == "DeltaChannel":
            found.update(timed_reads(graph, thread, sends))
    return found


def timed_reads(graph: Any, thread: Any, sends: Sends) -> dict[str, Any]:
    """Round trips and median time of a get_state, a get_state_history(limit=10), a turn."""
    found: dict[str, Any] = {}
    calls: dict[str, Callable[[], Any]] = {
        "get_state": lambda: graph.get_state(thread),
        "get_state_history(limit=10)": lambda: list(graph.get_state_history(thread, limit=10)),
        "one turn": lambda: graph.invoke({"messages": [("user", "one more")]}, thread),
    }
    for figure, call in calls.items():
        sends.count = 0
        with sends.counting():
            call()
        found[f"{figure} round trips"] = sends.count
        times = []
        for _ in range(ROUNDS if figure != "one turn" else 5):
            started = time.perf_counter()
            call()
            times.append(time.perf_counter() - started)
        found[f"{figure} ms"] = statistics.median(times) * 1e3
    found["messages"] = len(graph.get_state(thread).values["messages"])
    return found


def main() -> None:
    if len(sys.argv) > 1:
        url = sys.argv[1]
        report(url, int(url.rsplit(":", 1)[1].split("/")[0]))
        return
    with local_redis() as server:
        report(server.url, server.port)


def report(url: str, port: int) -> None:
    results = {name: measure(url, port, name, make) for name, make in savers(url).items()}
    figures = list(next(iter(results.values())))
    print(f"{'figure':34s}" + "".join(f"{name:>24s}" for name in results))
    for figure in figures:
        row = []
        for found in results.values():
            value = found.get(figure)
            row.append(f"{value:24.1f}" if isinstance(value, float) else f"{value!s:>24s}")
        print(f"{figure:34s}" + "".join(row))


if __name__ == "__main__":
    main()
