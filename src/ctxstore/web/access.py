"""Who may see the console: the address it binds and the token it asks for.

The console shows every chat of the namespaces it serves, so it is safe by default: bound to a
loopback address it needs nothing (only this machine reaches it), and bound to any other
address it refuses to start without a token (:func:`check_bind`). With a token, every request
but the login form's must carry it, as ``Authorization: Bearer <token>`` (scripts, proxies) or
as the cookie the login form sets (browsers); anything else is a 401. The cookie holds an HMAC
of the token, not the token, and is ``HttpOnly`` and ``SameSite=Strict``.

Nothing here imports a web framework: the gate is a plain ASGI middleware.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import parse_qs, quote

from ctxstore.errors import ConfigurationError

#: The environment variable ``ctxstore web`` reads the token from (``--token`` wins).
TOKEN_ENV = "CTXSTORE_WEB_TOKEN"
#: The cookie the login form sets.
COOKIE = "ctxstore_web"
#: The paths open without the token: the login form and its post.
LOGIN_PATH = "/login"

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` keeps the console on this machine (127.0.0.0/8, ::1,
    ``localhost``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None) -> None:
    """Refuse to serve a non-loopback address without a token (a ConfigurationError)."""
    if token is not None and not token.strip():
        raise ConfigurationError("the web console's token is empty")
    if not is_loopback(host) and token is None:
        raise ConfigurationError(
            f"the web console would be reachable from other machines on {host} without a "
            f"token: pass --token or set {TOKEN_ENV} (or bind 127.0.0.1)"
        )


def cookie_value(token: str) -> str:
    """What the login cookie holds: an HMAC of the token, so the cookie is not the token."""
    return hmac.new(token.encode(), b"ctxstore web console", hashlib.sha256).hexdigest()


class TokenGate:
    """ASGI middleware: every request but the login form's carries the token, else 401."""

    def __init__(self, app: ASGIApp, token: str, login_page: Callable[[str, bool], str]) -> None:
        self.app = app
        self.token = token
        self.cookie = cookie_value(token)
        self.login_page = login_page

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "http" and scope["path"] == LOGIN_PATH:
            await self._login(scope, receive, send)
            return
        if self._allowed(scope):
            await self.app(scope, receive, send)
            return
        target = scope["path"] + (
            ("?" + scope["query_string"].decode()) if scope.get("query_string") else ""
        )
        await _reply(
            send,
            401,
            self.login_page(target, False),
            "text/html; charset=utf-8",
            [(b"www-authenticate", b'Bearer realm="ctxstore"')],
        )

    def _allowed(self, scope: Scope) -> bool:
        for name, value in scope.get("headers", ()):
            if name == b"authorization":
                scheme, _, given = value.decode("latin-1").partition(" ")
                if scheme.lower() == "bearer" and hmac.compare_digest(
                    given.strip().encode(), self.token.encode()
                ):
                    return True
            elif name == b"cookie":
                for part in value.decode("latin-1").split(";"):
                    key, _, given = part.strip().partition("=")
                    if key == COOKIE and hmac.compare_digest(given.encode(), self.cookie.encode()):
                        return True
        return False

    async def _login(self, scope: Scope, receive: Receive, send: Send) -> None:
        query = parse_qs(scope.get("query_string", b"").decode())
        target = _local_target(query.get("next", ["/"])[0])
        if scope["method"] != "POST":
            await _reply(send, 200, self.login_page(target, False), "text/html; charset=utf-8")
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if len(body) > 16_384:
                await _reply(send, 413, "form too large", "text/plain; charset=utf-8")
                return
            if not message.get("more_body"):
                break
        form = parse_qs(body.decode("utf-8", "replace"))
        given = form.get("token", [""])[0]
        target = _local_target(form.get("next", [target])[0])
        if not hmac.compare_digest(given.encode(), self.token.encode()):
            await _reply(send, 401, self.login_page(target, True), "text/html; charset=utf-8")
            return
        cookie = f"{COOKIE}={self.cookie}; Path=/; HttpOnly; SameSite=Strict"
        if scope.get("scheme") == "https":
            cookie += "; Secure"
        await _reply(
            send,
            303,
            "",
            "text/plain; charset=utf-8",
            [(b"location", quote(target, safe="/?=&%").encode()), (b"set-cookie", cookie.encode())],
        )


def _local_target(target: str) -> str:
    """Where to go after the login: a path of this console only (never another site)."""
    if not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target


async def _reply(
    send: Send,
    status: int,
    text: str,
    content_type: str,
    headers: list[tuple[bytes, bytes]] | None = None,
) -> None:
    body = text.encode("utf-8")
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", content_type.encode()),
                (b"content-length", str(len(body)).encode()),
                (b"cache-control", b"no-store"),
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
