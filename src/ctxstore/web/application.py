"""The console as a Starlette app: ``build_app`` (``ctxstore.web.app`` calls it).

Every route is a GET (HEAD too): the console reads and never writes. Pages are rendered by the
server (Jinja2, autoescaped) and the graph is SVG drawn by the server (:mod:`ctxstore.web.svg`);
the only JavaScript is the live page's ``EventSource`` (``/assets/live.js``: the pages' content
security policy runs no inline script). A chat is named in the query string
(``?id=``), so any chat id works in a URL, and every page sits under its namespace
(``/n/<namespace>/``): a namespace the console was not started with, or a chat outside it, is a
404 (a chat id is looked up only in the store of the namespace in the URL).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route

from ctxstore._core.format.portable import dumps_line
from ctxstore._core.ops import reads
from ctxstore._core.ops.chats import get_chat
from ctxstore._core.ops.graph_window import graph_window
from ctxstore._core.ops.streams import active_stream
from ctxstore._core.ops.versions import message_versions
from ctxstore._core.protocol import together
from ctxstore.crypto.provider import KeyProvider
from ctxstore.errors import (
    ChatNotFoundError,
    ConfigurationError,
    CorruptionError,
    CtxStoreError,
    NotFoundError,
    ValidationError,
)
from ctxstore.store.async_store import AsyncStore
from ctxstore.store.sync_store import Store
from ctxstore.web import reading, svg, tools
from ctxstore.web.access import TokenGate
from ctxstore.web.marks import chat_marks
from ctxstore.web.tenants import Tenants, UnknownNamespaceError
from ctxstore.web.workers import workers_view

#: The depths on each side of the message the chat page centres on: at the newest message of
#: a long chat, the page draws the last 51 messages (a radius query parameter narrows or widens
#: it, up to 500).
PAGE_RADIUS = 50

_TEMPLATES = Environment(
    loader=FileSystemLoader(Path(__file__).with_name("templates")),
    autoescape=select_autoescape(default=True, default_for_string=True),
    trim_blocks=True,
    lstrip_blocks=True,
)
_TEMPLATES.filters["shown"] = lambda value: Markup(svg.text(value))  # escaped once, here
_TEMPLATES.filters["when"] = lambda ms: (
    time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(int(ms) / 1000)) if ms else ""
)


def build_app(
    store_or_url: Store | AsyncStore | str | None = None,
    *,
    namespaces: Sequence[str | None] | None = None,
    token: str | None = None,
    encryption: KeyProvider | None = None,
) -> Any:
    """The console's ASGI app (see the module); with ``token``, behind the token gate."""
    tenants = Tenants(store_or_url, namespaces, encryption=encryption)
    console = Console(tenants)
    app = Starlette(
        routes=[
            Route("/", console.home),
            Route("/n/{ns}/", console.chats),
            Route("/n/{ns}/chat", console.chat),
            Route("/n/{ns}/message", console.message),
            Route("/n/{ns}/context", console.context),
            Route("/n/{ns}/summaries", console.summaries),
            Route("/n/{ns}/live", console.live),
            Route("/n/{ns}/live/events", console.live_events),
            Route("/n/{ns}/export", console.export),
            Route("/n/{ns}/workers", console.workers),
            Route("/assets/live.js", console.live_script),
        ],
        exception_handlers={HTTPException: console.error_page},
    )
    app.state.tenants = tenants
    if token is not None:
        return TokenGate(app, token, _login_page)
    return app


def _login_page(target: str, failed: bool) -> str:
    return _TEMPLATES.get_template("login.html").render(target=target, failed=failed)


class Console:
    """The handlers; each reads through the tenants' stores only."""

    def __init__(self, tenants: Tenants) -> None:
        self.tenants = tenants

    # --- helpers ---------------------------------------------------------------------------------

    def _render(self, name: str, request: Request, **values: Any) -> HTMLResponse:
        page = _TEMPLATES.get_template(name).render(
            request=request, namespaces=self.tenants.labels, **values
        )
        return HTMLResponse(page, headers=_SECURITY_HEADERS)

    def _namespace(self, request: Request) -> str:
        label = str(request.path_params["ns"])
        try:
            self.tenants.store(label)
        except UnknownNamespaceError:
            raise HTTPException(404, f"no namespace {label!r} here") from None
        return label

    @staticmethod
    def _chat_id(request: Request) -> str:
        chat_id = request.query_params.get("id", "")
        if not chat_id:
            raise HTTPException(400, "which chat? (?id=)")
        return chat_id

    async def _run(self, label: str, operation: Any) -> Any:
        try:
            return await self.tenants.run(label, operation)
        except (ChatNotFoundError, NotFoundError) as error:
            raise HTTPException(404, str(error)) from None
        except ValidationError as error:  # an id that cannot name anything here
            raise HTTPException(404, str(error)) from None
        except CorruptionError as error:  # also a chat in the clear, in a console with keys
            raise HTTPException(409, str(error)) from None

    async def error_page(self, request: Request, error: Exception) -> Response:
        assert isinstance(error, HTTPException)
        page = _TEMPLATES.get_template("error.html").render(
            request=request,
            namespaces=self.tenants.labels,
            status=error.status_code,
            detail=error.detail,
        )
        return HTMLResponse(page, status_code=error.status_code, headers=_SECURITY_HEADERS)

    # --- pages -----------------------------------------------------------------------------------

    async def home(self, _request: Request) -> Response:
        return RedirectResponse(f"/n/{self.tenants.labels[0]}/", status_code=307)

    async def chats(self, request: Request) -> Response:
        label = self._namespace(request)
        state = self.tenants.store(label).state
        query = request.query_params
        try:
            page = await self.tenants.run(
                label,
                reading.chats_page(
                    state,
                    cursor=query.get("cursor") or None,
                    user_id=query.get("user") or None,
                    query=query.get("q") or None,
                ),
            )
        except ValidationError as error:
            raise HTTPException(400, str(error)) from None
        more = None
        if page.next_cursor is not None:
            more = "?" + urlencode(
                {
                    k: v
                    for k, v in (
                        ("cursor", page.next_cursor),
                        ("user", query.get("user")),
                        ("q", query.get("q")),
                    )
                    if v
                }
            )
        return self._render(
            "chats.html",
            request,
            ns=label,
            page=page,
            more=more,
            now_ms=time.time() * 1000,
            user=query.get("user", ""),
            q=query.get("q", ""),
        )

    async def chat(self, request: Request) -> Response:
        label = self._namespace(request)
        chat_id = self._chat_id(request)
        state = self.tenants.store(label).state
        around = request.query_params.get("around") or None
        radius = _int(request.query_params.get("radius"), PAGE_RADIUS, 1, 500)
        kept_radius = radius if radius != PAGE_RADIUS else ""  # the page's links keep it
        window, marks = await self._run(
            label,
            together(
                [
                    graph_window(state, chat_id, around=around, radius=radius),
                    chat_marks(state, chat_id),
                ]
            ),
        )
        for outcome in (window, marks):
            if isinstance(outcome, (ChatNotFoundError, NotFoundError, ValidationError)):
                raise HTTPException(404, str(outcome))
            if isinstance(outcome, CorruptionError):
                raise HTTPException(409, str(outcome))
            if isinstance(outcome, CtxStoreError):
                raise outcome

        def centred(message_id: str | None) -> str:
            return _url(label, "chat", id=chat_id, around=message_id or "")

        selected = request.query_params.get("message") or None

        def link(message_id: str) -> str:
            return _url(
                label,
                "chat",
                id=chat_id,
                around=around or "",
                message=message_id,
                radius=kept_radius,
            )

        panel = None
        if selected is not None:
            panel = await self._message_panel(label, chat_id, selected)
        center = window.center_id
        nodes = window.nodes
        earlier = later = None
        if window.has_earlier and nodes:
            first = min(nodes, key=lambda n: (n.depth, not n.on_active_branch))
            earlier = _url(label, "chat", id=chat_id, around=first.id, radius=kept_radius)
        if window.has_later and nodes:
            last = max(nodes, key=lambda n: (n.depth, n.on_active_branch))
            later = _url(label, "chat", id=chat_id, around=last.id, radius=kept_radius)
        return self._render(
            "chat.html",
            request,
            ns=label,
            chat=window.chat,
            chat_id=chat_id,
            window=window,
            graph=svg.draw(window, link, selected),
            panel=panel,
            center=center,
            earlier=earlier,
            later=later,
            marks=marks,
            centred=centred,
        )

    async def message(self, request: Request) -> Response:
        label = self._namespace(request)
        chat_id = self._chat_id(request)
        message_id = request.query_params.get("m", "")
        panel = await self._message_panel(label, chat_id, message_id)
        return self._render("message.html", request, ns=label, chat_id=chat_id, panel=panel)

    async def _message_panel(self, label: str, chat_id: str, message_id: str) -> dict[str, Any]:
        state = self.tenants.store(label).state
        stored, versions = await self._run(
            label,
            together(
                [
                    reads.get_message(state, chat_id, message_id),
                    message_versions(state, chat_id, message_id),
                ]
            ),
        )
        if isinstance(stored, CtxStoreError):
            raise HTTPException(404, str(stored))
        branches: tuple[str, ...] = ()
        siblings = 0
        if not isinstance(versions, CtxStoreError):
            siblings = len(versions)
            for version in versions:
                if version.id == message_id:
                    branches = version.branches
        payload = stored["message"]
        calls, answered = await self._run(
            label, tools.paired(state, chat_id, stored["id"], payload)
        )
        return {
            "id": stored["id"],
            "parent_id": stored["parent_id"],
            "created_at": stored["created_at"],
            "role": payload.get("role", payload.get("type", "?")),
            "payload": json.dumps(payload, indent=2, ensure_ascii=False, sort_keys=True),
            "metadata": json.dumps(stored.get("metadata") or {}, indent=2, ensure_ascii=False),
            "tokens": state.message_tokens(payload),
            "tool_calls": calls,
            "answered": answered,
            "branches": branches,
            "versions": siblings,
        }

    async def context(self, request: Request) -> Response:
        from ctxstore.web.context import context_view  # litellm's price map, on first use

        label = self._namespace(request)
        chat_id = self._chat_id(request)
        query = request.query_params
        model = query.get("model") or "gpt-4o"
        budget = _int(query.get("budget"), 0, 0, 10_000_000) or None
        state = self.tenants.store(label).state
        try:
            view = await self._run(
                label, context_view(state, chat_id, query.get("branch") or None, model, budget)
            )
        except CtxStoreError as error:
            raise HTTPException(400, str(error)) from None
        return self._render("context.html", request, ns=label, chat_id=chat_id, view=view)

    async def summaries(self, request: Request) -> Response:
        from ctxstore.web.context import summaries_view

        label = self._namespace(request)
        chat_id = self._chat_id(request)
        state = self.tenants.store(label).state
        view = await self._run(label, summaries_view(state, chat_id))
        return self._render("summaries.html", request, ns=label, chat_id=chat_id, view=view)

    async def live(self, request: Request) -> Response:
        label = self._namespace(request)
        chat_id = self._chat_id(request)
        state = self.tenants.store(label).state
        meta, stream, lease = await self._run(
            label,
            together(
                [
                    get_chat(state, chat_id),
                    active_stream(state, chat_id),
                    reading.chat_lease(state, chat_id),
                ]
            ),
        )
        if isinstance(meta, CtxStoreError):
            raise HTTPException(404, str(meta))
        return self._render(
            "live.html",
            request,
            ns=label,
            chat=meta,
            stream=None if isinstance(stream, CtxStoreError) else stream,
            lease=None if isinstance(lease, CtxStoreError) else lease,
            now_ms=time.time() * 1000,
            events=_url(label, "live/events", id=chat_id),
        )

    async def live_events(self, request: Request) -> Response:
        from ctxstore.web.live import answer_events

        label = self._namespace(request)
        chat_id = self._chat_id(request)
        after = request.headers.get("last-event-id") or request.query_params.get("after")
        store = self.tenants.store(label)
        await self._run(label, get_chat(store.state, chat_id))  # 404 before the stream opens
        events = answer_events(store, chat_id, request.query_params.get("stream"), after)
        return StreamingResponse(
            events,
            media_type="text/event-stream",
            headers={"cache-control": "no-store", "x-accel-buffering": "no"},
        )

    async def export(self, request: Request) -> Response:
        label = self._namespace(request)
        chat_id = self._chat_id(request)
        store = self.tenants.store(label)
        await self._run(label, get_chat(store.state, chat_id))
        try:
            records = await _export_records(store, chat_id)
        except ConfigurationError as error:  # a sealed chat, in a console without its keys
            raise HTTPException(409, str(error)) from None
        lines = (dumps_line(record).encode() for record in records)
        filename = "".join(c if c.isalnum() or c in "-_." else "_" for c in chat_id)[:80]
        return StreamingResponse(
            lines,
            media_type="application/x-ndjson",
            headers={"content-disposition": f'attachment; filename="{filename}.jsonl"'},
        )

    async def live_script(self, _request: Request) -> Response:
        """The live page's only script, served from here: the pages allow no inline script."""
        return Response(
            _LIVE_SCRIPT,
            media_type="text/javascript",
            headers={"x-content-type-options": "nosniff", "cache-control": "no-cache"},
        )

    async def workers(self, request: Request) -> Response:
        label = self._namespace(request)
        store = self.tenants.store(label)
        view = await self.tenants.run(label, workers_view(store.state, time.time()))
        return self._render("workers.html", request, ns=label, view=view)


_LIVE_SCRIPT = Path(__file__).with_name("templates").joinpath("live.js").read_text("utf-8")

_SECURITY_HEADERS = {
    "content-security-policy": (
        "default-src 'none'; style-src 'self' 'unsafe-inline'; script-src 'self'; "
        "img-src 'self' data:; connect-src 'self'; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    ),
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
}


def _url(label: str, page: str, **query: Any) -> str:
    shown = {k: v for k, v in query.items() if v not in ("", None)}
    return f"/n/{label}/{page}" + ("?" + urlencode(shown) if shown else "")


def _int(raw: str | None, default: int, low: int, high: int) -> int:
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise HTTPException(400, f"not a number: {raw!r}") from None
    if not low <= value <= high:
        raise HTTPException(400, f"{value} is not from {low} to {high}")
    return value


async def _export_records(store: Store | AsyncStore, chat_id: str) -> list[dict[str, Any]]:
    """The chat's records, as ``ctxstore export`` writes them (a sync store's in a thread)."""
    if isinstance(store, AsyncStore):
        return [record async for record in store.export_chat(chat_id)]
    return await asyncio.to_thread(lambda: list(store.export_chat(chat_id)))
