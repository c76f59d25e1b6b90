"""The console and sealed chats: with the keys (``encryption=``, ``ctxstore web --keys``) it
shows them as any chat; without, it shows a sealed chat closed (its graph, ids and counts, never
its title, metadata or text), refuses its export, and shows the chats in the clear as ever."""

from __future__ import annotations

import os
import re
from typing import Any

import pytest
from starlette.testclient import TestClient

import ctxstore
import ctxstore.web
from ctxstore.cli.main import main
from ctxstore.crypto import LocalKeyProvider
from tests.conftest import backend_url
from tests.support.keyspace import raw_client
from tests.support.sealing import fill


@pytest.fixture(params=["memory", "redis"])
def sealed_url(request: pytest.FixtureRequest) -> str:
    return backend_url(request, str(request.param))


@pytest.fixture
def provider() -> LocalKeyProvider:
    return LocalKeyProvider.from_keys({"kek-a": os.urandom(32)}, current="kek-a")


@pytest.fixture
def marks(sealed_url: str, namespace: str, provider: LocalKeyProvider) -> list[str]:
    """A sealed chat c1 (see ``fill``) and a chat in the clear, p1, in the namespace."""
    with ctxstore.connect(sealed_url, namespace=namespace, encryption=provider) as store:
        found, _ids = fill(store.admin())
    with ctxstore.connect(sealed_url, namespace=namespace, encryption=None) as plain:
        plain.admin().open_chat("p1", "bob")
        plain.admin().append(
            "p1", None, [{"role": "user", "content": "words in the clear"}], expected_head=None
        )
    return found


def pages(client: TestClient, namespace: str) -> dict[str, Any]:
    base = f"/n/{namespace}"
    chat = client.get(f"{base}/chat?id=c1")
    ids = re.findall(r"message=([0-9a-z.]+)", chat.text)
    return {
        "chats": client.get(f"{base}/"),
        "chat": chat,
        "message": client.get(f"{base}/message?id=c1&m={ids[0]}") if ids else None,
        "export": client.get(f"{base}/export?id=c1"),
        "plain": client.get(f"{base}/chat?id=p1"),
        "ids": ids,
    }


def test_with_the_keys_a_sealed_chat_shows_as_any(
    sealed_url: str, namespace: str, provider: LocalKeyProvider, marks: list[str]
) -> None:
    console = ctxstore.web.app(sealed_url, namespaces=[namespace], encryption=provider)
    with TestClient(console) as client:
        seen = pages(client, namespace)
    assert marks[8] in seen["chats"].text  # the title
    assert any(mark[:12] in seen["chat"].text for mark in marks[:5])  # the previews
    assert any(mark in seen["message"].text for mark in marks[:5])
    assert seen["export"].status_code == 200
    assert marks[1] in seen["export"].text
    assert seen["plain"].status_code == 409  # a chat in the clear: refused, said why
    assert "written without encryption" in seen["plain"].text


@pytest.mark.parametrize("passed", ["url", "store"])
def test_without_the_keys_a_sealed_chat_shows_its_graph_not_its_text(
    sealed_url: str, namespace: str, marks: list[str], passed: str
) -> None:
    store = ctxstore.connect(sealed_url, namespace=namespace, encryption=None)
    console = ctxstore.web.app(sealed_url if passed == "url" else store, namespaces=[namespace])
    with TestClient(console) as client:
        seen = pages(client, namespace)
    shown = "".join(seen[name].text for name in ("chats", "chat", "message"))
    assert "MARK" not in shown  # not even a preview's first characters
    assert "c1" in seen["chats"].text
    assert seen["chat"].status_code == seen["message"].status_code == 200
    assert len(set(seen["ids"])) == 4  # every message of the graph, by id
    assert "sealed" in seen["message"].text
    assert seen["export"].status_code == 409
    assert "encryption" in seen["export"].text
    assert "MARK" not in seen["export"].text
    assert "words in the" in seen["plain"].text  # its preview
    assert store.state.show_closed is False  # the program's own store still refuses
    store.close()


def test_ctxstore_web_takes_keys(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    served: dict[str, Any] = {}
    LocalKeyProvider(tmp_path / "keys")
    monkeypatch.setattr("uvicorn.run", lambda app, **_options: served.update(app=app))
    monkeypatch.setattr(
        "ctxstore.web.app", lambda _url, **options: served.update(options) or "the app"
    )
    assert main(["web", "--url", "memory://", "--keys", str(tmp_path / "keys")]) == 0
    assert isinstance(served["encryption"], LocalKeyProvider)
    assert main(["--keys", str(tmp_path / "keys"), "web", "--url", "memory://"]) == 0
    assert isinstance(served["encryption"], LocalKeyProvider)
    assert main(["web", "--url", "memory://"]) == 0
    assert served["encryption"] is None
    assert main(["web", "--url", "memory://", "--keys", str(tmp_path / "typo")]) == 1


def test_without_the_keys_text_planted_in_a_sealed_chat_is_refused_not_shown(
    sealed_url: str, namespace: str, marks: list[str]
) -> None:
    """A record in the clear put into a sealed chat (someone who can write to Redis): the
    keyless console refuses the page, as a store with the keys would, and shows none of it."""
    client = raw_client(sealed_url)
    planted = client.lindex(f"ctx:{namespace}:{{p1}}:log", 0)
    client.lset(f"ctx:{namespace}:{{c1}}:log", 1, planted)
    client.close()
    with TestClient(ctxstore.web.app(sealed_url, namespaces=[namespace])) as console:
        page = console.get(f"/n/{namespace}/chat?id=c1")
    assert page.status_code == 409
    assert "not sealed" in page.text
    assert "words in the" not in page.text
