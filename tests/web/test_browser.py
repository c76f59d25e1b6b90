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
    head = store.run(graph_window(store.state, "trip"))
    assert page.evaluate("document.querySelectorAll('svg.graph g.node').length") == len(head.nodes)
    # Earlier: the window that holds the three branches' forks, the checkpoint and the summary.
    page.click("#earlier")
    page.wait_for("new URLSearchParams(location.search).get('around') !== null")
    around = page.evaluate("new URLSearchParams(location.search).get('around')")
    window = store.run(graph_window(store.state, "trip", around=around))
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
