"""A real headless Chromium, driven over the Chrome DevTools Protocol (CDP), for browser tests.

The web console is server-rendered (inline SVG, a little plain JavaScript, server-sent events),
so its tests need a real browser but only a small part of one: navigate, run JavaScript, click,
take a screenshot, set a cookie or a header. That part of the protocol is a few JSON messages
over one websocket, so the harness speaks it directly (the ``websockets`` sync client) to the
system's ``chromium`` instead of pulling in Selenium or Playwright and the browsers they download.

Without a Chromium the tests that need one skip, unless ``CI=true``: then they fail, so CI can
never pass by skipping (:func:`require_chromium`, the same rule as ``tests/support/servers.py``).

Usage::

    with browser(tmp_path) as page:
        page.goto(f"{base_url}/console")
        page.click('g.node[data-id="n1"]')
        assert page.wait_for("document.querySelector('#panel').textContent") == "n1"
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

#: The environment variable naming the browser binary (a path or a name on PATH).
CHROMIUM_ENV = "CTXSTORE_CHROMIUM"
#: The names looked up on PATH when the variable is not set, in order.
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")
#: Seconds each command, navigation or wait may take by default.
DEFAULT_TIMEOUT = 15.0
#: What the browser answers an evaluation that met a navigation in flight.
_NAVIGATING = ("Inspected target navigated or closed", "Cannot find context with specified id")
#: Seconds the browser may take to start; generous, for a loaded CI machine.
STARTUP_TIMEOUT = 30.0
#: Seconds each probe of a polling wait may take, however little of the wait is left: the
#: probe near the deadline must get its answer, so the wait can say what it last saw.
_PROBE_TIMEOUT = 5.0
#: Seconds a browser is given to exit on SIGTERM before its process group is killed.
GRACE = 10.0
#: The page's viewport in CSS pixels, set exactly (``--window-size`` alone leaves a smaller
#: viewport: headless Chromium subtracts the height of the toolbar it pretends to draw).
VIEWPORT = (1400, 1000)

#: The command line after the binary. ``--no-sandbox``: tests run as root, where Chromium's
#: sandbox refuses to start. ``--disable-dev-shm-usage``: containers have a small /dev/shm.
#: ``--remote-debugging-port=0``: the browser picks a free port and writes it to
#: DevToolsActivePort, so parallel test workers never race for a port. The rest keep the browser
#: quiet and deterministic: no proxy (tests only visit loopback servers), no background network
#: traffic or updates, no throttling of timers, no scrollbars in screenshots.
FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--no-default-browser-check",
    "--remote-debugging-port=0",
    f"--window-size={VIEWPORT[0]},{VIEWPORT[1]}",
    "--no-proxy-server",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-background-timer-throttling",
    "--disable-renderer-backgrounding",
    "--hide-scrollbars",
    "--mute-audio",
)

#: Events kept for a later wait; old ones are dropped first, so a chatty page cannot grow it.
_EVENT_BUFFER = 10_000
#: The second line of DevToolsActivePort, checked whole because the file can be read while the
#: browser is still writing it.
_BROWSER_PATH = re.compile(
    r"/devtools/browser/[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}"
)
#: Runs the browser as its child, on Linux. When Chromium exits, its helper processes (zygotes,
#: renderers) are still exiting and become orphans; they would be reparented to PID 1, which in
#: a container may reap them late or never, leaving zombies. As a child subreaper this process
#: becomes their parent instead, reaps them all (killing any that linger), and only then exits
#: with the browser's status: once it is reaped, nothing of the browser is left. SIGTERM is
#: passed on to the browser, for its own orderly shutdown.
_REAPER = """
import ctypes, os, signal, subprocess, sys, time

ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
browser, stopping = None, False


def stop(*_):
    global stopping
    stopping = True
    if browser is not None:
        browser.terminate()


signal.signal(signal.SIGTERM, stop)
browser = subprocess.Popen(sys.argv[1:])
if stopping:
    browser.terminate()
status = browser.wait()


def kill_children():
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat") as stat:
                parent = int(stat.read().rsplit(")", 1)[1].split()[1])
            if parent == os.getpid():
                os.kill(int(entry), signal.SIGKILL)
        except (OSError, IndexError, ValueError):
            continue


deadline = time.monotonic() + 3
while True:
    try:
        pid, _ = os.waitpid(-1, os.WNOHANG)
    except ChildProcessError:
        break
    if pid == 0:
        if time.monotonic() > deadline:
            kill_children()
        time.sleep(0.01)
sys.exit(status if status >= 0 else 128 - status)
"""

#: Noise the browser logs on every start in a container without D-Bus; left out of error tails.
_NOISE = re.compile(r":ERROR:dbus/|Failed to connect to the bus")

#: Scrolls the element into view and says where its centre is, or why it cannot be clicked yet.
#: The centre is hit-tested, so a click that would land on another element (an overlay, a gap
#: inside an SVG group) is reported instead of silently clicking something else.
_CLICK_TARGET = """(() => {
  const el = document.querySelector(%s);
  if (!el) return {reason: "no element matches"};
  el.scrollIntoView({block: "center", inline: "center", behavior: "instant"});
  const box = el.getBoundingClientRect();
  if (box.width === 0 && box.height === 0) return {reason: "the element has no size (hidden?)"};
  const x = box.left + box.width / 2, y = box.top + box.height / 2;
  const hit = document.elementFromPoint(x, y);
  if (hit === null || !(hit === el || el.contains(hit))) {
    const what = hit === null ? "nothing" : "<" + hit.tagName.toLowerCase() + ">";
    return {reason: `its centre (${x}, ${y}) hits ${what}, not the element`};
  }
  return {x, y};
})()"""


class BrowserError(RuntimeError):
    """The browser failed to start, crashed, or answered a command with an error."""


class JavaScriptError(BrowserError):
    """An expression run with :meth:`Browser.evaluate` threw (or its promise rejected)."""


class NavigationError(BrowserError):
    """:meth:`Browser.goto` could not load the page (a network error, not an HTTP status)."""


def find_chromium() -> str | None:
    """The browser binary: ``CTXSTORE_CHROMIUM`` if set (then nothing else is tried, so a wrong
    value is noticed instead of another browser being used), else the first of
    :data:`CHROMIUM_NAMES` on PATH; None when there is none."""
    chosen = os.environ.get(CHROMIUM_ENV, "").strip()
    if chosen:
        return shutil.which(chosen)
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found is not None:
            return found
    return None


def require_chromium() -> str:
    """The browser binary; skips the test without one, or fails it under ``CI=true``."""
    binary = find_chromium()
    if binary is None:
        chosen = os.environ.get(CHROMIUM_ENV, "").strip()
        message = (
            f"{CHROMIUM_ENV}={chosen!r} is not an executable"
            if chosen
            else f"no Chromium found (looked for {', '.join(CHROMIUM_NAMES)} on PATH)"
        )
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{message}, and CI=true requires chromium for the browser tests")
        pytest.skip(message)
    return binary


@contextlib.contextmanager
def browser(tmp_path: Path, *, binary: str | None = None) -> Iterator[Browser]:
    """A started browser with one blank page, closed (process and all) on exit."""
    started = Browser.start(tmp_path, binary=binary)
    try:
        yield started
    finally:
        started.close()


class Browser:
    """One Chromium process and a CDP connection to its page.

    Every method is synchronous and bounded by a timeout (:data:`DEFAULT_TIMEOUT` unless given):
    a stuck page fails the test with a :class:`TimeoutError` naming what it waited for, never
    hangs it. Uncaught page exceptions and console messages are collected in :attr:`errors` and
    :attr:`console`, so a test can check that the page's own JavaScript did not fail.
    """

    def __init__(
        self,
        process: subprocess.Popen[bytes],
        log_path: Path,
        port: int,
        browser_url: str,
        connection: ClientConnection,
    ) -> None:
        #: The process started: on Linux the reaper (see ``_REAPER``) whose child is the
        #: browser; either way the leader of the process group of everything the browser runs.
        self.process = process
        self.log_path = log_path
        #: The DevTools HTTP port, and the browser-wide websocket (from DevToolsActivePort).
        self.port = port
        self.browser_url = browser_url
        self.errors: list[str] = []
        self.console: list[str] = []
        self._connection = connection
        self._ids = itertools.count(1)
        self._events: deque[dict[str, Any]] = deque(maxlen=_EVENT_BUFFER)
        self._closed = False

    # -- life cycle ---------------------------------------------------------------------------

    @classmethod
    def start(
        cls,
        directory: Path,
        *,
        binary: str | None = None,
        extra_args: Sequence[str] = (),
        timeout: float = STARTUP_TIMEOUT,
    ) -> Browser:
        """Start the browser with a fresh profile under ``directory`` and connect to its page.

        The browser's output goes to a file, not a pipe: nobody reads a pipe while the tests
        run, and a full one would block the browser. On a failure the process is stopped and
        the error carries the end of that output, where Chromium says why it would not start.
        """
        if binary is None:
            binary = find_chromium()
        if binary is None:
            raise BrowserError(f"no Chromium found: set {CHROMIUM_ENV} or install chromium")
        profile = directory / "chromium-profile"
        profile.mkdir(parents=True, exist_ok=True)
        active_port = profile / "DevToolsActivePort"
        active_port.unlink(missing_ok=True)  # a stale file would name a dead browser's port
        log_path = directory / "chromium.log"
        command = [binary, *FLAGS, f"--user-data-dir={profile}", *extra_args, "about:blank"]
        if sys.platform.startswith("linux"):
            command = [sys.executable, "-I", "-S", "-c", _REAPER, *command]
        with log_path.open("wb") as log:
            # A session of its own: every helper process (zygote, renderer, GPU, network) is in
            # the browser's process group, so close() can kill whatever it leaves behind.
            process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        try:
            port, path = _read_active_port(active_port, process, deadline)
            page_url = _page_websocket(port, deadline)
            connection = connect(
                page_url,
                proxy=None,  # never through an HTTP(S)_PROXY of the environment: it is loopback
                open_timeout=max(deadline - time.monotonic(), 1.0),
                ping_interval=None,  # a busy machine must not close an idle connection
                compression=None,
                # Read every frame as it comes: with a bounded queue, events nobody waited for
                # stall the reading thread, and a close handshake behind them waits its timeout.
                max_queue=None,
                max_size=None,  # full-page screenshots are megabytes of base64
                close_timeout=2,
            )
        except BaseException as exc:
            _stop_process(process)
            if not isinstance(exc, Exception):
                raise
            raise BrowserError(
                f"chromium ({binary}) did not start: {exc}\n"
                f"--- end of its output ({log_path}):\n{_tail(log_path)}"
            ) from exc
        started = cls(process, log_path, port, f"ws://127.0.0.1:{port}{path}", connection)
        try:
            started._call("Page.enable")
            started._call("Runtime.enable")
            started._call("Network.enable")  # for cookies and extra headers
            started._call(
                "Emulation.setDeviceMetricsOverride",
                {
                    "width": VIEWPORT[0],
                    "height": VIEWPORT[1],
                    "deviceScaleFactor": 1,
                    "mobile": False,
                },
            )
        except BaseException:
            started.close()
            raise
        return started

    def close(self) -> None:
        """Close the connection and stop the browser, reaping every process it started."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(Exception):
            self._connection.close()
        _stop_process(self.process)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # -- page actions -------------------------------------------------------------------------

    def goto(self, url: str, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        """Navigate the page to ``url`` and wait until its load event.

        The wait is for the load event of *this* navigation: first the commit of the new
        document (``Page.frameNavigated`` with the loader id ``Page.navigate`` returned), then
        the next ``Page.loadEventFired``, so a late load event of the previous page is never
        taken for it. A network error (refused, DNS, ...) raises :class:`NavigationError`; an
        HTTP error status loads a page like any other.
        """
        deadline = time.monotonic() + timeout
        self._events.clear()
        result = self._call("Page.navigate", {"url": url}, timeout=timeout)
        if result.get("errorText"):
            raise NavigationError(f"navigating to {url} failed: {result['errorText']}")
        loader = result.get("loaderId")
        if loader is None:
            return  # a same-document navigation (only the fragment changed): no load event

        def committed(event: dict[str, Any]) -> bool:
            frame = event.get("params", {}).get("frame", {})
            return bool(
                event.get("method") == "Page.frameNavigated"
                and "parentId" not in frame
                and frame.get("loaderId") == loader
            )

        self._wait_event(committed, deadline, f"the navigation to {url}", timeout)
        self._wait_event(
            lambda event: event.get("method") == "Page.loadEventFired",
            deadline,
            f"the load event of {url}",
            timeout,
        )

    def evaluate(self, expression: str, *, timeout: float = DEFAULT_TIMEOUT) -> Any:
        """The value of a JavaScript expression in the page (a promise is awaited), as JSON
        data; ``undefined`` is None. Raises :class:`JavaScriptError` with the exception's text
        (message and stack) if it throws."""
        result = self._call(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
            timeout=timeout,
        )
        details = result.get("exceptionDetails")
        if details is not None:
            exception = details.get("exception", {})
            text = exception.get("description") or exception.get("value") or details.get("text")
            raise JavaScriptError(f"{expression!r} threw: {text}")
        return result.get("result", {}).get("value")

    def wait_for(
        self, expression: str, *, timeout: float = DEFAULT_TIMEOUT, interval: float = 0.05
    ) -> Any:
        """The first truthy value of ``expression``, polled every ``interval`` seconds: for what
        the page shows after a timer, a fetch or a server-sent event.

        An expression that throws counts as not yet true (the element it reads may not exist
        yet), and so does one the browser could not run because the page was navigating (a
        click on a link: the old document is gone, the new one not yet there); the last error
        is in the :class:`TimeoutError` if the wait runs out.
        """
        deadline = time.monotonic() + timeout
        last: str = "it stayed falsy"
        while True:
            if time.monotonic() >= deadline:
                raise TimeoutError(f"{expression!r} was not true within {timeout:g}s ({last})")
            try:
                value = self.evaluate(expression, timeout=self._probe_timeout(deadline))
            except JavaScriptError as exc:
                last = f"last error: {exc}"
            except BrowserError as exc:
                if not any(sign in str(exc) for sign in _NAVIGATING):
                    raise
                last = f"the page was navigating: {exc}"
            else:
                if value:
                    return value
                last = f"last value: {value!r}"
            time.sleep(min(interval, max(deadline - time.monotonic(), 0)))

    def click(self, selector: str, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        """Click the centre of the first element matching the CSS ``selector`` with the left
        mouse button, as a user would: real input events (``isTrusted``), hover first.

        Works on SVG elements (a ``<g>``, a ``<circle>``) as well as HTML. The element is
        scrolled into view, and the click waits until the element exists, has a size and is
        the one under its centre, up to ``timeout``; the error then says what was wrong.
        """
        deadline = time.monotonic() + timeout
        expression = _CLICK_TARGET % json.dumps(selector)
        while True:
            target = self.evaluate(expression, timeout=self._probe_timeout(deadline))
            if "reason" not in target:
                break
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"cannot click {selector!r} within {timeout:g}s: {target['reason']}"
                )
            time.sleep(0.05)
        point = {"x": target["x"], "y": target["y"]}
        remaining = self._probe_timeout(deadline)
        self._call("Input.dispatchMouseEvent", {"type": "mouseMoved", **point}, timeout=remaining)
        for kind, buttons in (("mousePressed", 1), ("mouseReleased", 0)):
            self._call(
                "Input.dispatchMouseEvent",
                {"type": kind, **point, "button": "left", "buttons": buttons, "clickCount": 1},
                timeout=remaining,
            )

    def screenshot(
        self, path: Path, *, full_page: bool = True, timeout: float = DEFAULT_TIMEOUT
    ) -> Path:
        """Write a PNG of the page to ``path``: the whole document, beyond the window, unless
        ``full_page`` is false (then the :data:`VIEWPORT`). Returns ``path``."""
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            metrics = self._call("Page.getLayoutMetrics", timeout=timeout)
            size = metrics.get("cssContentSize") or metrics["contentSize"]
            params["captureBeyondViewport"] = True
            params["clip"] = {
                "x": 0,
                "y": 0,
                "width": math.ceil(size["width"]),
                "height": math.ceil(size["height"]),
                "scale": 1,
            }
        result = self._call("Page.captureScreenshot", params, timeout=timeout)
        path.write_bytes(base64.b64decode(result["data"]))
        return path

    def set_cookie(
        self, name: str, value: str, url: str, *, timeout: float = DEFAULT_TIMEOUT
    ) -> None:
        """Store a cookie for ``url`` (its host and path), as if that site had set it."""
        result = self._call(
            "Network.setCookie", {"name": name, "value": value, "url": url}, timeout=timeout
        )
        if result.get("success") is False:
            raise BrowserError(f"the browser refused the cookie {name!r} for {url}")

    def set_extra_headers(
        self, headers: dict[str, str], *, timeout: float = DEFAULT_TIMEOUT
    ) -> None:
        """Send these headers with every later request of the page (an ``Authorization``
        bearer token, say); an empty dict stops sending them."""
        self._call("Network.setExtraHTTPHeaders", {"headers": headers}, timeout=timeout)

    # -- the protocol -------------------------------------------------------------------------

    @staticmethod
    def _probe_timeout(deadline: float) -> float:
        """What is left of a polling wait, but at least :data:`_PROBE_TIMEOUT`."""
        return max(deadline - time.monotonic(), _PROBE_TIMEOUT)

    def _call(
        self, method: str, params: dict[str, Any] | None = None, *, timeout: float = DEFAULT_TIMEOUT
    ) -> dict[str, Any]:
        """Send one command and return its result. Events that arrive first are kept for
        :meth:`_wait_event`; replies to earlier commands that timed out are dropped."""
        if self._closed:
            raise BrowserError(f"{method}: the browser is closed")
        ident = next(self._ids)
        deadline = time.monotonic() + timeout
        self._send({"id": ident, "method": method, "params": params or {}}, method)
        while True:
            message = self._receive(deadline, f"the reply to {method}", timeout)
            if message.get("id") == ident:
                error = message.get("error")
                if error is not None:
                    detail = f" ({error['data']})" if error.get("data") else ""
                    raise BrowserError(f"{method} failed: {error.get('message')}{detail}")
                result: dict[str, Any] = message.get("result", {})
                return result
            if "method" in message:
                self._events.append(message)

    def _wait_event(
        self,
        matches: Callable[[dict[str, Any]], bool],
        deadline: float,
        what: str,
        timeout: float,
    ) -> dict[str, Any]:
        """The first event, kept or arriving, that ``matches``; the events before it are
        consumed with it (a wait moves forward in the page's history, never back)."""
        while self._events:
            event = self._events.popleft()
            if matches(event):
                return event
        while True:
            message = self._receive(deadline, what, timeout)
            if "method" in message and matches(message):
                return message

    def _send(self, message: dict[str, Any], what: str) -> None:
        try:
            self._connection.send(json.dumps(message))
        except ConnectionClosed as exc:
            raise self._gone(what) from exc

    def _receive(self, deadline: float, what: str, timeout: float) -> dict[str, Any]:
        """The next message from the browser; page errors and console output are recorded on
        the way."""
        remaining = deadline - time.monotonic()
        try:
            if remaining <= 0:
                raise TimeoutError
            raw = self._connection.recv(timeout=remaining)
        except TimeoutError:
            raise TimeoutError(f"timed out after {timeout:g}s waiting for {what}") from None
        except ConnectionClosed as exc:
            raise self._gone(what) from exc
        message: dict[str, Any] = json.loads(raw)
        method = message.get("method")
        if method == "Runtime.exceptionThrown":
            details = message["params"]["exceptionDetails"]
            exception = details.get("exception", {})
            self.errors.append(str(exception.get("description") or details.get("text")))
        elif method == "Runtime.consoleAPICalled":
            args = message["params"].get("args", [])
            text = " ".join(str(arg.get("value", arg.get("description", ""))) for arg in args)
            self.console.append(f"{message['params'].get('type')}: {text}")
        return message

    def _gone(self, what: str) -> BrowserError:
        """The error for a connection the browser closed: it crashed or was killed."""
        status = self.process.poll()
        state = "still exiting" if status is None else f"exit status {status}"
        return BrowserError(
            f"the browser closed the DevTools connection while waiting for {what} ({state})\n"
            f"--- end of its output ({self.log_path}):\n{_tail(self.log_path)}"
        )


def _read_active_port(
    path: Path, process: subprocess.Popen[bytes], deadline: float
) -> tuple[int, str]:
    """The port and browser websocket path from DevToolsActivePort, once written whole."""
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise BrowserError(f"it exited with status {process.returncode}")
        with contextlib.suppress(FileNotFoundError):
            lines = path.read_text(encoding="utf-8").splitlines()
            if len(lines) >= 2 and lines[0].isdigit() and _BROWSER_PATH.fullmatch(lines[1]):
                return int(lines[0]), lines[1]
        time.sleep(0.05)
    raise TimeoutError(f"{path} was not written in time")


def _page_websocket(port: int, deadline: float) -> str:
    """The websocket URL of the browser's page tab (``/json/list``), or of a new one.

    ``/json/list`` also lists the headless browser's own UI documents (``browser_ui``
    targets), so only a ``page`` target will do; the tab may appear just after the port file.
    """
    # No proxy, whatever the environment says: the browser is on loopback.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    base = f"http://127.0.0.1:{port}"
    created_after = time.monotonic() + 2.0
    while time.monotonic() < deadline:
        with opener.open(f"{base}/json/list", timeout=5) as answer:
            targets: list[dict[str, Any]] = json.load(answer)
        for target in targets:
            if target.get("type") == "page" and "webSocketDebuggerUrl" in target:
                return str(target["webSocketDebuggerUrl"])
        if time.monotonic() > created_after:
            request = urllib.request.Request(f"{base}/json/new?about:blank", method="PUT")
            with opener.open(request, timeout=5) as answer:
                return str(json.load(answer)["webSocketDebuggerUrl"])
        time.sleep(0.05)
    raise TimeoutError(f"no page target on port {port}")


def _stop_process(process: subprocess.Popen[bytes]) -> None:
    """Stop the browser and its helpers, and reap it: SIGTERM (which the reaper passes on;
    Chromium then shuts down in order, and the reaper reaps its helpers), SIGKILL to the whole
    process group if that takes more than :data:`GRACE` seconds, and SIGKILL to the group again
    for anything left over.

    The process is reaped last: until then its id cannot be reused, so the group kill can only
    reach processes this browser started.
    """
    try:
        if _running(process):
            process.terminate()
            if not _exits(process, GRACE):
                _kill_group(process.pid)
        _kill_group(process.pid)
    finally:
        try:
            process.wait(timeout=GRACE)
        except subprocess.TimeoutExpired:
            _kill_group(process.pid)
            process.kill()
            process.wait()


def _running(process: subprocess.Popen[bytes]) -> bool:
    """Whether the process has not exited yet (without reaping it)."""
    if process.returncode is not None:
        return False
    if not hasattr(os, "waitid"):  # macOS: no waiting without reaping; poll() will do
        return process.poll() is None
    try:
        state = os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return False
    return state is None


def _exits(process: subprocess.Popen[bytes], timeout: float) -> bool:
    """Whether the process exits within ``timeout`` seconds (left unreaped)."""
    deadline = time.monotonic() + timeout
    while _running(process):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _tail(log_path: Path, lines: int = 30) -> str:
    """The last lines of the browser's output, without its D-Bus noise."""
    try:
        with log_path.open("rb") as log:
            log.seek(max(log_path.stat().st_size - 65536, 0))
            text = log.read().decode("utf-8", "replace")
    except OSError as exc:
        return f"(unreadable: {exc})"
    kept = [line for line in text.splitlines() if line.strip() and not _NOISE.search(line)]
    return "\n".join(kept[-lines:]) or "(no output)"
