"""LangGraph graphs on the ctxstore savers, on every backend, sync and async: a
``MessagesState`` graph and one whose messages are a ``DeltaChannel`` over many turns, an
interrupt and its resume, ``update_state`` on a past checkpoint (a fork), the state history,
and parallel branches writing at one step; each read back as LangGraph's own in-memory saver
reads it."""

from __future__ import annotations

import asyncio
import operator
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.graph.message import _messages_delta_reducer
from langgraph.types import Command, interrupt

import ctxstore
from ctxstore.integrations.langgraph import AsyncCtxStoreSaver, CtxStoreSaver

TURNS = 12


class DeltaState(TypedDict):
    messages: Annotated[list[Any], DeltaChannel(_messages_delta_reducer, snapshot_frequency=4)]


def chat_graph(state_type: Any) -> StateGraph:
    def reply(state: Any) -> dict[str, Any]:
        return {"messages": [("ai", f"re: {state['messages'][-1].content}")]}

    builder = StateGraph(state_type)
    builder.add_node("reply", reply)
    builder.add_edge(START, "reply")
    return builder


class Fan(TypedDict):
    seen: Annotated[list[str], operator.add]


def fan_graph() -> StateGraph:
    builder = StateGraph(Fan)
    for name in ("a", "b", "c"):
        builder.add_node(name, lambda _state, name=name: {"seen": [name]})
        builder.add_edge(START, name)
    return builder


class Asked(TypedDict):
    answer: str


def asking_graph() -> StateGraph:
    def ask(_state: Asked) -> dict[str, Any]:
        return {"answer": str(interrupt("which city?"))}

    builder = StateGraph(Asked)
    builder.add_node("ask", ask)
    builder.add_edge(START, "ask")
    return builder


def contents(state: Any) -> list[str]:
    return [message.content for message in state.values.get("messages", [])]


@pytest.fixture(params=["sync", "async"])
def shell(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def run_all(backend: str, namespace: str, shell: str, saver_of: Any) -> dict[str, Any]:
    """Every scenario on a ctxstore saver (``saver_of`` None: LangGraph's in-memory one)."""
    if shell == "sync":
        with ctxstore.connect(backend, namespace=namespace) as store:
            return scenarios(CtxStoreSaver(store) if saver_of else InMemorySaver(), False)

    async def on_async() -> dict[str, Any]:
        store = ctxstore.connect_async(backend, namespace=namespace)
        try:
            return await ascenarios(AsyncCtxStoreSaver(store) if saver_of else InMemorySaver())
        finally:
            await store.close()

    return asyncio.run(on_async())


def scenarios(saver: Any, _async: bool) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for label, state_type in (("messages", MessagesState), ("delta", DeltaState)):
        graph = chat_graph(state_type).compile(checkpointer=saver)
        thread = {"configurable": {"thread_id": f"chat-{label}"}}
        for turn in range(TURNS):
            graph.invoke({"messages": [("user", f"turn {turn}")]}, thread)
        found[label] = contents(graph.get_state(thread))
        history = list(graph.get_state_history(thread, limit=10))
        found[f"{label} history"] = [contents(item) for item in history]
        past = history[5].config
        graph.update_state(past, {"messages": [("user", "a fork")]})
        found[f"{label} fork"] = contents(graph.get_state(thread))
    asking = asking_graph().compile(checkpointer=saver)
    thread = {"configurable": {"thread_id": "asking"}}
    first = asking.invoke({"answer": ""}, thread)
    found["interrupt"] = [item.value for item in first["__interrupt__"]]
    found["resumed"] = asking.invoke(Command(resume="Lisbon"), thread)
    fan = fan_graph().compile(checkpointer=saver)
    found["fan"] = sorted(fan.invoke({"seen": []}, {"configurable": {"thread_id": "fan"}})["seen"])
    return found


async def ascenarios(saver: Any) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for label, state_type in (("messages", MessagesState), ("delta", DeltaState)):
        graph = chat_graph(state_type).compile(checkpointer=saver)
        thread = {"configurable": {"thread_id": f"chat-{label}"}}
        for turn in range(TURNS):
            await graph.ainvoke({"messages": [("user", f"turn {turn}")]}, thread)
        found[label] = contents(await graph.aget_state(thread))
        history = [item async for item in graph.aget_state_history(thread, limit=10)]
        found[f"{label} history"] = [contents(item) for item in history]
        past = history[5].config
        await graph.aupdate_state(past, {"messages": [("user", "a fork")]})
        found[f"{label} fork"] = contents(await graph.aget_state(thread))
    asking = asking_graph().compile(checkpointer=saver)
    thread = {"configurable": {"thread_id": "asking"}}
    first = await asking.ainvoke({"answer": ""}, thread)
    found["interrupt"] = [item.value for item in first["__interrupt__"]]
    found["resumed"] = await asking.ainvoke(Command(resume="Lisbon"), thread)
    fan = fan_graph().compile(checkpointer=saver)
    result = await fan.ainvoke({"seen": []}, {"configurable": {"thread_id": "fan"}})
    found["fan"] = sorted(result["seen"])
    return found


def test_graphs_read_back_as_on_langgraphs_own_saver(
    backend: str, namespace: str, shell: str
) -> None:
    ours = run_all(backend, namespace, shell, saver_of=True)
    theirs = run_all(backend, namespace, shell, saver_of=None)
    assert ours == theirs
    assert len(ours["delta"]) == 2 * TURNS
    assert ours["delta"] == ours["messages"]
    assert ours["interrupt"] == ["which city?"]
    assert ours["resumed"] == {"answer": "Lisbon"}
    assert ours["fan"] == ["a", "b", "c"]
    assert ours["delta fork"][-1] == "a fork"


def test_a_states_reads_cost_what_the_issue_allows(backend: str, namespace: str) -> None:
    """After 20 turns of a DeltaChannel graph: one ``get_state`` at most 2 round trips,
    ``get_state_history(limit=10)`` at most 11 (one page, and each snapshot's delta history)."""
    from tests.support.wire import trace_wire

    with ctxstore.connect(backend, namespace=namespace) as store:
        graph = chat_graph(DeltaState).compile(checkpointer=CtxStoreSaver(store))
        thread = {"configurable": {"thread_id": "counted"}}
        for turn in range(20):
            graph.invoke({"messages": [("user", f"turn {turn}")]}, thread)
        graph.get_state(thread)  # the scripts are loaded once per server
        with trace_wire() as wire:
            state = graph.get_state(thread)
        assert wire.round_trips <= 2
        assert len(state.values["messages"]) == 40
        with trace_wire() as wire:
            history = list(graph.get_state_history(thread, limit=10))
        assert len(history) == 10
        assert wire.round_trips <= 11
