"""The console is safe to point at production: it writes nothing, whatever is sent to it, and
everything it shows from the data is escaped."""

from __future__ import annotations

import re

import pytest
from starlette.routing import Route
from starlette.testclient import TestClient

import ctxstore
import ctxstore.web
from ctxstore.models import NewMessage
from tests.support.keyspace import snapshot
from tests.web.conftest import Seeded

#: Just under the store's 1 MiB payload limit, ending with markup.
HUGE = "A" * ((1 << 20) - 200) + "<script>alert(7)"
METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def routes(app: object) -> list[str]:
    inner = getattr(app, "app", app)
    return [route.path for route in inner.routes if isinstance(route, Route)]  # type: ignore[attr-defined]


def test_no_route_writes_anything_with_any_method(seeded: Seeded) -> None:
    """Every route, every method, with the seeded chat's ids and a message id: the keyspace is
    byte-identical afterwards (the listing, which repairs stale index entries elsewhere, runs
    here without repairs; the test makes one entry stale to prove it)."""
    store = seeded.store
    base = store.state.keyspace.base
    index = store.state.keyspace.all_chats_index
    store.client.zadd(index, {"trip": 1})  # a stale score a repairing listing would fix
    app = ctxstore.web.app(store)
    paths = routes(app)
    assert len(paths) == 11
    before = snapshot(seeded.url, base)
    query = {"id": "trip", "m": seeded.main[3], "around": seeded.main[5], "message": seeded.main[5]}
    with TestClient(app) as client:
        for path in paths:
            if path.endswith("/live/events"):
                continue  # an endless stream: read in test_live; it only reads
            url = path.replace("{ns}", seeded.namespace)
            for method in METHODS:
                response = client.request(method, url, params=query, data={"x": "1"})
                assert response.status_code in (200, 307, 405), (method, url, response.status_code)
                if method not in ("GET", "HEAD"):
                    assert response.status_code == 405
    assert snapshot(seeded.url, base) == before


NASTY = [
    "<script>alert('x')</script>",
    '"><svg onload=alert(1)>',
    "bell\x07 and escape\x1b[31m and nul-ish \x01",
    "</textarea><img src=x onerror=alert(2)>",
]


@pytest.fixture
def nasty(seeded: Seeded) -> str:
    store = seeded.store
    chat_id = "<img src=x onerror=alert(3)>"
    store.upsert_chat(chat_id, '"><script>alert(4)</script>', {"note": "<script>alert(5)</script>"})
    store.update_chat(chat_id, title="<script>alert(6)</script>")
    store.append(
        chat_id, "main",
        [NewMessage({"role": "user", "content": text}, metadata={"html": text}) for text in NASTY]
        + [NewMessage({"role": "assistant", "content": HUGE})],
        expected_head=None,
    )  # fmt: skip
    store.upsert_checkpoint(
        chat_id, '<b onmouseover="alert(8)">', store.load_branch(chat_id).messages[1]["id"]
    )
    return chat_id


def test_everything_from_the_data_is_escaped(seeded: Seeded, nasty: str) -> None:
    store = seeded.store
    messages = store.load_branch(nasty).messages
    ns = seeded.namespace
    pages = [
        ("", {}),
        ("", {"user": '"><script>alert(4)</script>'}),
        ("chat", {"id": nasty}),
        ("chat", {"id": nasty, "message": messages[0]["id"]}),
        ("message", {"id": nasty, "m": messages[1]["id"]}),
        ("message", {"id": nasty, "m": messages[-1]["id"]}),
        ("context", {"id": nasty}),
        ("summaries", {"id": nasty}),
        ("live", {"id": nasty}),
        ("workers", {}),
        ("chat", {"id": "<script>alert(9)</script>"}),  # a 404 that names the id
    ]
    with TestClient(ctxstore.web.app(store)) as client:
        for path, query in pages:
            response = client.get(f"/n/{ns}/{path}", params=query)
            assert response.status_code in (200, 404), (path, response.status_code)
            html = response.text
            assert (
                re.search(r"<script>alert|<svg onload|<img src=x|<b onmouseover", html) is None
            ), path
            assert "\x07" not in html
            assert "\x1b" not in html
            policy = response.headers["content-security-policy"]
            assert policy.startswith("default-src 'none'")
            assert "script-src 'self';" in policy  # no inline script runs, injected or not
        big = client.get(f"/n/{ns}/message", params={"id": nasty, "m": messages[-1]["id"]})
        assert big.text.count("A" * 1000) >= 1  # the whole payload, escaped
        graph = client.get(f"/n/{ns}/chat", params={"id": nasty}).text
        assert "&lt;script&gt;alert(" in graph  # shown as text
        assert len(graph) < 200_000  # previews, not the 1 MiB text
