"""The browser harness (tests/support/browser.py) against a real headless Chromium and a small
page served from loopback: what the console's browser tests will rely on (navigation, inline
SVG clicks, live updates, screenshots, cookies and headers, JavaScript errors) works, and the
browser never outlives its test.

Without Chromium these tests skip, except under ``CI=true``, where they fail.
"""

from __future__ import annotations

import os
import socket
import struct
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.support import browser as harness
from tests.support.browser import Browser, BrowserError, JavaScriptError, NavigationError

#: Three nodes in view and one below the fold; a click writes the node's id, and whether the
#: event was a trusted (real input) one, into the panel. A counter ticks five times.
PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>harness</title>
<style>
  body { margin: 0; font: 14px sans-serif; }
  .node circle { fill: #4a90d9; stroke: #123; }
  #spacer { height: 1600px; }
</style></head>
<body>
<svg id="graph" width="600" height="240" viewBox="0 0 600 240">
  <line x1="100" y1="100" x2="500" y2="100" stroke="#999"/>
  <g class="node" data-id="alpha" transform="translate(100,100)"><circle r="30"/>
    <text y="50" text-anchor="middle">alpha</text></g>
  <g class="node" data-id="beta" transform="translate(300,100)"><circle r="30"/>
    <text y="50" text-anchor="middle">beta</text></g>
  <g class="node" data-id="gamma" transform="translate(500,100)"><circle r="30"/>
    <text y="50" text-anchor="middle">gamma</text></g>
</svg>
<div id="panel"></div>
<div id="counter">0</div>
<div id="spacer"></div>
<svg width="200" height="200"><g class="node" data-id="far" transform="translate(100,100)">
  <circle id="far-circle" r="40"/></g></svg>
<script>
  for (const node of document.querySelectorAll("g.node")) {
    node.addEventListener("click", (event) => {
      const panel = document.getElementById("panel");
      panel.textContent = node.dataset.id;
      panel.dataset.trusted = String(event.isTrusted);
    });
  }
  let count = 0;
  function tick() {
    count += 1;
    document.getElementById("counter").textContent = String(count);
    if (count < 5) setTimeout(tick, 100);
  }
  setTimeout(tick, 100);
</script>
</body></html>
"""

#: A page whose script subscribes to /events and lists each message it receives.
EVENTS_PAGE = """<!doctype html>
<html><body><ul id="log"></ul>
<script>
  const source = new EventSource("/events");
  source.onmessage = (event) => {
    const item = document.createElement("li");
    item.textContent = event.data;
    document.getElementById("log").append(item);
    if (event.data === "done") source.close();
  };
</script></body></html>
"""

BROKEN_PAGE = """<!doctype html>
<html><body><script>throw new Error("deliberately broken");</script></body></html>
"""


@dataclass
class Seen:
    """One request the test server answered: its path and the headers the tests look at."""

    path: str
    cookie: str | None
    authorization: str | None


@dataclass
class Site:
    url: str
    requests: list[Seen] = field(default_factory=list)

    def last(self, path: str) -> Seen:
        return [seen for seen in self.requests if seen.path == path][-1]


class _Handler(BaseHTTPRequestHandler):
    site: Site

    def do_GET(self) -> None:
        self.site.requests.append(
            Seen(self.path, self.headers.get("Cookie"), self.headers.get("Authorization"))
        )
        if self.path == "/events":
            self._events()
            return
        body = {"/": PAGE, "/live": EVENTS_PAGE, "/broken": BROKEN_PAGE}.get(self.path)
        if body is None:
            self.send_error(404)
            return
        data = body.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _events(self) -> None:
        """Three server-sent events a little apart, then the end of the stream."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        for data in ("one", "two", "done"):
            self.wfile.write(f"retry: 60000\ndata: {data}\n\n".encode())
            self.wfile.flush()
            time.sleep(0.1)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the tests read ``site.requests`` instead."""


@pytest.fixture(scope="module")
def chromium() -> str:
    """The browser binary: skips the module without one, fails it under ``CI=true``."""
    return harness.require_chromium()


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    """The test pages, served on a free loopback port (the kernel picks it: no race)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    running = Site(f"http://127.0.0.1:{server.server_address[1]}")
    _Handler.site = running
    thread = threading.Thread(target=server.serve_forever, name="browser-test-site", daemon=True)
    thread.start()
    try:
        yield running
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture(scope="module")
def page(chromium: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    """One browser for the module (starting one per test would cost a second each)."""
    with harness.browser(tmp_path_factory.mktemp("chromium"), binary=chromium) as started:
        yield started


def test_goto_and_evaluate_count_the_svg_nodes(page: Browser, site: Site) -> None:
    page.goto(site.url + "/")
    assert page.evaluate("document.title") == "harness"
    assert page.evaluate("document.querySelectorAll('svg g.node').length") == 4
    ids = page.evaluate("[...document.querySelectorAll('g.node')].map(n => n.dataset.id)")
    assert ids == ["alpha", "beta", "gamma", "far"]
    assert page.evaluate("undefined") is None
    assert page.evaluate("Promise.resolve({a: [1, 2]})") == {"a": [1, 2]}


def test_click_an_svg_group_and_a_circle_below_the_fold(page: Browser, site: Site) -> None:
    page.goto(site.url + "/")
    page.click('g.node[data-id="beta"]')
    # The mouse events are acknowledged once the page has handled them: no wait is needed.
    assert page.evaluate("document.getElementById('panel').textContent") == "beta"
    assert page.evaluate("document.getElementById('panel').dataset.trusted") == "true"
    page.click("#far-circle")
    assert page.evaluate("document.getElementById('panel').textContent") == "far"
    assert page.evaluate("window.scrollY") > 0


def test_click_reports_what_is_wrong(page: Browser, site: Site) -> None:
    page.goto(site.url + "/")
    with pytest.raises(TimeoutError, match="no element matches"):
        page.click("g.node[data-id='missing']", timeout=0.3)


def test_wait_for_sees_a_timer_update(page: Browser, site: Site) -> None:
    page.goto(site.url + "/")
    started = time.monotonic()
    assert page.wait_for("Number(document.getElementById('counter').textContent) >= 5") is True
    assert time.monotonic() - started < 10
    with pytest.raises(TimeoutError, match="was not true within"):
        page.wait_for("false", timeout=0.3)


def test_wait_for_sees_server_sent_events(page: Browser, site: Site) -> None:
    page.goto(site.url + "/live")  # the open event stream does not hold up the load event
    log = "[...document.querySelectorAll('#log li')].map(li => li.textContent)"
    page.wait_for(f"{log}.includes('done')")
    assert page.evaluate(log) == ["one", "two", "done"]


def test_screenshot_is_a_full_page_png(page: Browser, site: Site, tmp_path: Path) -> None:
    page.goto(site.url + "/")
    shot = page.screenshot(tmp_path / "page.png")
    data = shot.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    assert len(data) > 5_000
    width, height = struct.unpack(">II", data[16:24])  # the IHDR chunk
    assert width == 1400
    assert height > 1000  # the whole document, beyond the 1000-pixel window
    view = page.screenshot(tmp_path / "view.png", full_page=False).read_bytes()
    assert struct.unpack(">II", view[16:24]) == (1400, 1000)


def test_cookie_and_extra_headers_reach_the_server(page: Browser, site: Site) -> None:
    page.set_cookie("session", "s3cr3t", site.url + "/")
    page.set_extra_headers({"Authorization": "Bearer t0ken"})
    try:
        page.goto(site.url + "/")
    finally:
        page.set_extra_headers({})
    seen = site.last("/")
    assert seen.cookie is not None
    assert "session=s3cr3t" in seen.cookie
    assert seen.authorization == "Bearer t0ken"


def test_javascript_errors_raise(page: Browser, site: Site) -> None:
    page.goto(site.url + "/")
    with pytest.raises(JavaScriptError, match="TypeError"):
        page.evaluate("null.x")
    with pytest.raises(JavaScriptError, match="nope"):
        page.evaluate("Promise.reject(new Error('nope'))")
    assert page.evaluate("1 + 1") == 2  # the page is still usable


def test_page_errors_are_collected(page: Browser, site: Site) -> None:
    page.goto(site.url + "/broken")
    page.evaluate("1")  # the exception event arrives before this reply
    assert any("deliberately broken" in error for error in page.errors)


def test_a_network_error_fails_the_navigation(page: Browser) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(NavigationError, match="ERR_CONNECTION_REFUSED"):
        page.goto(f"http://127.0.0.1:{port}/")


def test_close_leaves_no_process(chromium: str, tmp_path: Path) -> None:
    with harness.browser(tmp_path, binary=chromium) as started:
        assert "HeadlessChrome" in started.evaluate("navigator.userAgent")
        pid = started.process.pid
    assert started.process.returncode is not None  # reaped: no zombie
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)  # and no helper of its process group is left


def test_a_browser_that_will_not_start_says_why(tmp_path: Path) -> None:
    fake = tmp_path / "fake-chromium"
    fake.write_text("#!/bin/sh\necho 'cannot open display: nowhere' >&2\nexit 3\n")
    fake.chmod(0o755)
    with pytest.raises(BrowserError, match=r"(?s)status 3.*cannot open display: nowhere"):
        Browser.start(tmp_path, binary=str(fake))


def test_missing_chromium_skips_outside_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(harness.CHROMIUM_ENV, "/nonexistent/chromium")
    monkeypatch.delenv("CI", raising=False)
    assert harness.find_chromium() is None
    with pytest.raises(pytest.skip.Exception, match="not an executable"):
        harness.require_chromium()


def test_missing_chromium_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(harness, "find_chromium", lambda: None)
    monkeypatch.delenv(harness.CHROMIUM_ENV, raising=False)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true requires chromium"):
        harness.require_chromium()
