"""examples/ai_sdk_chat, driven by the AI SDK's own client (DefaultChatTransport and
readUIMessageStream, from Node) over HTTP, on a redis-server: what the client builds is what the
store saved, for a plain answer, a two-step tool call and a regenerate; a client that drops its
connection reconnects and gets the answer whole; stop, the chat list, the chat's messages."""

from __future__ import annotations

import importlib.util
import json
import os
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import ctxstore
from tests.support import servers
from tests.support.node import run_script
from tests.support.scripted_model import Call, ScriptedModel

APP = Path(__file__).resolve().parents[2] / "examples" / "ai_sdk_chat" / "app.py"
NAMESPACE = "chat-example"


def load_app(url: str) -> ModuleType:
    os.environ["CTXSTORE_URL"] = url
    try:
        spec = importlib.util.spec_from_file_location(f"ai_sdk_chat_{uuid.uuid4().hex}", APP)
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        del os.environ["CTXSTORE_URL"]
    return module


@pytest.fixture(scope="module")
def server(redis_server: servers.RedisProcess) -> Iterator[str]:
    """The example app served by uvicorn on a free loopback port, in this process (so the
    scripted model the tests install answers its calls)."""
    import uvicorn

    app = load_app(redis_server.url).app
    port = servers.free_port()
    config = uvicorn.Config(app, host=servers.HOST, port=port, log_level="warning", lifespan="off")
    running = uvicorn.Server(config)
    thread = threading.Thread(target=running.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not running.started:
        assert time.monotonic() < deadline, "the example app did not start"
        time.sleep(0.02)
    yield f"http://{servers.HOST}:{port}"
    running.should_exit = True
    thread.join(timeout=10)


@pytest.fixture
def model(monkeypatch: pytest.MonkeyPatch) -> ScriptedModel:
    return ScriptedModel().install(monkeypatch)


@pytest.fixture
def store(redis_server: servers.RedisProcess) -> Iterator[ctxstore.Store]:
    opened = ctxstore.connect(redis_server.url, namespace=NAMESPACE).admin()
    yield opened
    opened.close()


def client(server: str, **request: Any) -> dict[str, Any]:
    """The SDK's client run once (tests/node/chat_client.mjs)."""
    result: dict[str, Any] = run_script(
        "chat_client.mjs", json.dumps({"api": f"{server}/api/chat", **request}), timeout=60
    )
    return result


def ui_user(message_id: str, text: str) -> dict[str, Any]:
    return {"id": message_id, "role": "user", "parts": [{"type": "text", "text": text}]}


def saved(store: ctxstore.Store, chat_id: str) -> list[dict[str, Any]]:
    return [{"id": m["id"], **m["message"]} for m in store.load_branch(chat_id).messages]


def settle(store: ctxstore.Store, chat_id: str, count: int) -> list[dict[str, Any]]:
    """The branch once the background answer saved its ``count`` messages."""
    deadline = time.monotonic() + 20
    while True:
        try:
            messages = saved(store, chat_id)
        except ctxstore.ChatNotFoundError:
            messages = []
        if len(messages) >= count or time.monotonic() > deadline:
            return messages
        time.sleep(0.02)


def streaming(store: ctxstore.Store, chat_id: str) -> bool:
    try:
        return store.active_stream(chat_id) is not None
    except ctxstore.ChatNotFoundError:
        return False


def http(method: str, url: str, body: Any = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        url, data=data, method=method, headers={"content-type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            raw = response.read()
            return response.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def test_a_plain_answer_is_what_the_store_saved(
    server: str, store: ctxstore.Store, model: ScriptedModel
) -> None:
    model.answers = [["Hello from the backend."]]
    chat_id = f"chat-{uuid.uuid4().hex}"
    result = client(server, chatId=chat_id, messages=[ui_user("u1", "Hi there")])
    messages = settle(store, chat_id, 2)
    assert [m["id"] for m in messages] == ["u1", result["message"]["id"]]
    assert result["message"] == messages[1]
    assert result["chunks"][0] == "start"
    assert result["chunks"][-1] == "finish"
    assert store.get_chat(chat_id).title == model.title  # made by the model (generate_title)


def test_a_two_step_tool_call_is_what_the_store_saved(
    server: str, store: ctxstore.Store, model: ScriptedModel
) -> None:
    model.answers = [[Call("c1", "weather", {"city": "Porto"})], ["Sunny, 21 degrees."]]
    chat_id = f"chat-{uuid.uuid4().hex}"
    result = client(server, chatId=chat_id, messages=[ui_user("u1", "Weather in Porto?")])
    answer = settle(store, chat_id, 2)[1]
    assert result["message"] == answer
    assert [p["type"] for p in answer["parts"]] == [
        "step-start",
        "tool-weather",
        "step-start",
        "text",
    ]
    assert answer["parts"][1]["output"] == {"city": "Porto", "sky": "sunny", "celsius": 21}


def test_a_regenerate_is_what_the_store_saved_on_its_new_branch(
    server: str, store: ctxstore.Store, model: ScriptedModel
) -> None:
    model.answers = [["first"], ["second"]]
    chat_id = f"chat-{uuid.uuid4().hex}"
    first = client(server, chatId=chat_id, messages=[ui_user("u1", "q")])["message"]
    settle(store, chat_id, 2)
    again = client(
        server,
        chatId=chat_id,
        messages=[ui_user("u1", "q")],
        trigger="regenerate-message",
        messageId=first["id"],
    )["message"]
    deadline = time.monotonic() + 20
    while len(store.message_versions(chat_id, first["id"])) < 2:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert again["id"] != first["id"]
    assert again == saved(store, chat_id)[1]  # the active branch is the new one
    assert [v.id for v in store.message_versions(chat_id, first["id"])] == [
        first["id"],
        again["id"],
    ]
    status, shown = http("GET", f"{server}/api/chat/{chat_id}")
    assert status == 200
    assert shown[1]["metadata"]["versions"] == {"index": 1, "count": 2}


def test_a_client_that_drops_its_connection_resumes_the_answer_whole(
    server: str, store: ctxstore.Store, model: ScriptedModel
) -> None:
    model.answers = [["an answer long enough to be interrupted by a dropped connection"]]
    model.delay = 0.03
    chat_id = f"chat-{uuid.uuid4().hex}"
    result = client(server, chatId=chat_id, messages=[ui_user("u1", "tell me")], disconnectAfter=3)
    assert len(result["firstChunks"]) == 3
    assert result["resumed"]
    answer = settle(store, chat_id, 2)[1]
    assert result["message"] == answer
    assert "aborted" not in json.dumps(answer)  # the drop did not stop the answer


def test_stop_list_messages_and_an_idle_resume(
    server: str, store: ctxstore.Store, model: ScriptedModel
) -> None:
    model.answers = [["one two three four five six seven eight nine ten " * 3]]
    model.delay = 0.03
    chat_id = f"chat-{uuid.uuid4().hex}"
    status, _ = http("GET", f"{server}/api/chat/{chat_id}/stream")
    assert status == 204
    sender = threading.Thread(
        target=lambda: client(server, chatId=chat_id, messages=[ui_user("u1", "count")]),
        daemon=True,
    )
    sender.start()
    deadline = time.monotonic() + 20
    while not streaming(store, chat_id):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    time.sleep(0.2)
    assert http("POST", f"{server}/api/chat/{chat_id}/stop") == (200, {"stopped": True})
    sender.join(timeout=30)
    answer = settle(store, chat_id, 2)[1]
    assert answer["metadata"]["ctxstore"]["aborted"] is True
    status, listed = http("GET", f"{server}/api/chats")
    assert status == 200
    assert chat_id in [chat["id"] for chat in listed]
    assert http("GET", f"{server}/api/chat/{chat_id}") == (200, saved(store, chat_id))
    assert http("GET", f"{server}/api/chat/nope-{uuid.uuid4().hex}")[0] == 404


def test_a_bad_message_is_refused_before_anything_is_written(
    server: str, store: ctxstore.Store, model: ScriptedModel
) -> None:
    chat_id = f"chat-{uuid.uuid4().hex}"
    bad = {"id": chat_id, "messages": [{"id": "u1", "role": "user", "parts": [{"type": "x"}]}]}
    status, body = http("POST", f"{server}/api/chat", bad)
    assert status == 400
    assert "unknown part type" in body["error"]
    assert model.requests == []
    assert chat_id not in [chat.id for chat in store.list_chats()]


def test_the_app_module_is_short() -> None:
    """The example is meant to be read whole: about 100 lines."""
    assert len(APP.read_text().splitlines()) <= 140
