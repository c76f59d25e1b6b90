"""The console in a real browser: headless Chromium (tests/support/browser.py) on a uvicorn
server of the console, a chat with three branches, a checkpoint and a summary.

Screenshots are saved as artifacts in ``$CTXSTORE_ARTIFACTS`` (default ``.artifacts/`` at the
project root); the README's screenshot is ``chat.png`` of this test.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import ctxstore
import ctxstore.web
from ctxstore import user
from ctxstore._core.ops.graph_window import graph_window
from ctxstore.web.application import PAGE_RADIUS
from tests.support.browser import Browser, browser, require_chromium
from tests.web.conftest import USER, seed, serving

ROOT = Path(__file__).resolve().parents[2]
ANSWER = "Day one: the Alfama and a tram ride. Day two: Belem and the river at dusk."


def artifacts() -> Path:
    folder = Path(os.environ.get("CTXSTORE_ARTIFACTS", ROOT / ".artifacts"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def chromium() -> str:
    return require_chromium()


@pytest.fixture
def store() -> Iterator[ctxstore.Store]:
    opened = ctxstore.connect("memory://", namespace="travel").admin()
    seed(opened)
    yield opened
    opened.close()


@pytest.fixture
def site(store: ctxstore.Store) -> Iterator[str]:
    with serving(ctxstore.web.app(store)) as base:
        yield base + "/n/travel"


@pytest.fixture
def page(chromium: str, tmp_path: Path) -> Iterator[Browser]:
    with browser(tmp_path, binary=chromium) as opened:
        yield opened


def test_the_chats_and_chat_pages_in_a_browser(
    page: Browser, site: str, store: ctxstore.Store
) -> None:
    page.goto(site + "/")
    assert page.evaluate("document.querySelectorAll('tr.chat-row').length") == 1
    assert "Lisbon trip" in page.evaluate("document.querySelector('#chats').innerText")
    page.screenshot(artifacts() / "chats.png")

    page.click("tr.chat-row a")
    page.wait_for("document.querySelector('svg.graph') !== null")
    head = store.run(graph_window(store.state, "trip", radius=PAGE_RADIUS))
    assert page.evaluate("document.querySelectorAll('svg.graph g.node').length") == len(head.nodes)
    # A narrower window (radius=6) around the head, then earlier: the window that holds the
    # three branches' forks, the checkpoint and the summary.
    page.goto(site + "/chat?id=trip&radius=6")
    page.wait_for("document.querySelector('#earlier') !== null")
    page.click("#earlier")
    # The new URL is there as soon as the navigation commits; the graph once the document has
    # finished loading (the server draws the SVG into the page).
    page.wait_for(
        "new URLSearchParams(location.search).get('around') !== null"
        " && document.readyState === 'complete'"
    )
    around = page.evaluate("new URLSearchParams(location.search).get('around')")
    window = store.run(graph_window(store.state, "trip", around=around, radius=6))
    assert {branch.name for branch in window.branches} == {"main-v2", "main-v3"}  # heads drawn
    assert window.lanes == 3
    drawn = {node.id for node in window.nodes}
    assert page.evaluate("document.querySelectorAll('svg.graph g.node').length") == len(drawn)
    edges = sum(1 for node in window.nodes if node.parent_id in drawn)
    assert (
        page.evaluate("document.querySelectorAll('svg.graph path.edge:not(.stub)').length") == edges
    )
    bracket = page.evaluate(
        "(() => { const g = document.querySelector('svg.graph g.summary');"
        " if (!g) return null; const box = g.getBBox();"
        " return {covers: Number(g.dataset.covers), width: box.width}; })()"
    )
    assert bracket is not None
    assert bracket["covers"] == len(window.summaries[0].covered_ids) > 0
    assert bracket["width"] > 100  # drawn over the messages it covers
    labels = page.evaluate(
        "[...document.querySelectorAll('svg.graph text')].map(t => t.textContent)"
    )
    assert "⎇ main-v3" in labels
    assert "⚑ before-booking" in labels

    # a message of main's before the fork of main-v3: on both branches
    target = next(n for n in window.nodes if n.on_active_branch and n.depth == 15)
    page.click(f'svg.graph g.node[data-id="{target.id}"]')
    page.wait_for(f"document.querySelector('#message-panel')?.dataset.id === {target.id!r}")
    panel = page.evaluate("document.querySelector('#message-panel').innerText")
    payload = store.get_message("trip", target.id)["message"]
    assert str(payload["content"]) in panel
    assert "main-v3" in panel  # which branches hold it
    page.screenshot(artifacts() / "chat.png")


def test_the_live_page_shows_an_answer_as_it_streams(
    page: Browser, site: str, store: ctxstore.Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    page.goto(site + "/live?id=trip")
    assert "waiting for an answer" in page.evaluate("document.querySelector('#status').innerText")
    engine = ctxstore.ContextEngine(store=store, chat_id="trip", user_id=USER)
    engine.set(user("Plan the last evening."))

    def answer() -> None:
        for _chunk in engine.stream_turn("gpt-4o-mini", mock_response=ANSWER, title=False):
            time.sleep(0.05)  # a model that takes its time: the page shows the text growing

    writer = threading.Thread(target=answer)
    writer.start()
    page.wait_for("document.querySelector('#status').innerText.startsWith('streaming')", timeout=30)
    partial = page.wait_for(
        "(() => { const n = document.querySelector('#answer').textContent.length;"
        f" return n > 0 && n < {len(ANSWER)} ? n : 0; }})()",
        timeout=30,
    )
    assert 0 < partial < len(ANSWER)  # seen while it arrived, not only at the end
    page.wait_for(f"document.querySelector('#answer').textContent === {ANSWER!r}", timeout=30)
    writer.join(timeout=30)
    page.wait_for("document.querySelector('#status').innerText === 'answer complete'")
    page.screenshot(artifacts() / "live.png")
    saved = store.load_branch("trip").messages[-1]["message"]
    assert saved["content"] == ANSWER


@pytest.fixture
def long_chat() -> Iterator[ctxstore.store.AdminStore]:
    """``long``: 2,000 messages on main, a branch made at the 5th (two messages of its own), a
    checkpoint at the 8th and a summary through the 20th: all far from the newest message."""
    opened = ctxstore.connect("memory://", namespace="travel").admin()
    opened.upsert_chat("long", USER)
    main = opened.append(
        "long",
        "main",
        [{"role": "user", "content": f"message {i}"} for i in range(2_000)],
        expected_head=None,
    ).message_ids
    early = opened.create_branch("long", main[4], activate=False, name="early-idea")
    opened.append(
        "long",
        early.name,
        [{"role": "user", "content": "another path"}, {"role": "user", "content": "and on"}],
        expected_head=main[4],
    )
    opened.upsert_checkpoint("long", "kickoff", main[7])
    opened.write_summary("long", main[19], "The first twenty messages.", tokens=6)
    yield opened
    opened.close()


def test_the_chat_page_shows_the_whole_shape_of_a_long_chat(
    page: Browser, long_chat: ctxstore.store.AdminStore
) -> None:
    """50 messages drawn or more by default, and above the graph every branch, checkpoint and
    summary, each a link that opens the window centred on it."""
    with serving(ctxstore.web.app(long_chat)) as base:
        page.goto(base + "/n/travel/chat?id=long")
        page.wait_for("document.querySelector('svg.graph') !== null")
        assert page.evaluate("document.querySelectorAll('svg.graph g.node').length") >= 50
        listed = page.evaluate(
            "[...document.querySelectorAll('#branches li, #checkpoints li, #summaries li')]"
            ".map(li => li.innerText)"
        )
        assert any("early-idea" in line and "7 messages" in line for line in listed)
        assert any(line.startswith("main") and "active" in line for line in listed)
        assert any("kickoff" in line for line in listed)
        assert any("through" in line for line in listed)
        labels = "[...document.querySelectorAll('svg.graph text')].map(t => t.textContent)"
        assert "⎇ early-idea" not in page.evaluate(labels)  # far from the active head
        page.click("#branches li:nth-child(2) a")  # the window centred on its head
        page.wait_for(f"{labels}.includes('⎇ early-idea')")
        page.goto(base + "/n/travel/chat?id=long")
        page.wait_for("document.querySelector('#checkpoints a') !== null")
        page.click("#checkpoints a")
        page.wait_for(f"{labels}.includes('⚑ kickoff')")
        page.goto(base + "/n/travel/chat?id=long")
        page.wait_for("document.querySelector('#summaries a') !== null")
        page.click("#summaries a")
        page.wait_for("document.querySelectorAll('svg.graph g.summary').length === 1")
        page.screenshot(artifacts() / "long-chat.png")
