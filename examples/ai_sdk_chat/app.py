"""A chat backend for a Vercel AI SDK ``useChat`` frontend: the Python twin of the SDK's
"chatbot message persistence" and "resume streams" guides, on ctxstore.

    CTXSTORE_URL=redis://localhost:6379 CHAT_MODEL=gpt-4o-mini uvicorn app:app

Endpoints (what ``DefaultChatTransport`` calls, and what a chat list needs):

- ``POST /api/chat``: ``{id, messages, trigger, messageId}``; the answer runs in a background
  task to its end (a client that disconnects does not stop it) and the response streams it from
  the answer's Redis stream;
- ``GET /api/chat/{id}/stream``: the answer being streamed, replayed (``useChat({resume:
  true})``); 204 when there is none;
- ``POST /api/chat/{id}/stop``: stops the answer (saved with what was streamed, as aborted);
- ``GET /api/chats``: the user's chats; ``GET /api/chat/{id}``: the active branch as UI messages.

The user is the ``x-user-id`` header here; a real backend takes it from its session. Each
request works on ``store.for_user(user)``: nothing it calls can reach another user's chat, and
another user's chat id answers as one that does not exist. A client that reconnects to the
stream sends the last event id it saw (``Last-Event-ID``) and gets what followed it, once.
``CHAT_MOCK_RESPONSE`` answers every turn with that text (litellm's ``mock_response``: no key).
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

import ctxstore
from ctxstore.frontend import UI_MESSAGE_STREAM_HEADERS, achat, aresume_sse, astop_stream

store = ctxstore.connect_async(os.environ.get("CTXSTORE_URL"), namespace="chat-example")
MODEL = os.environ.get("CHAT_MODEL", "gpt-4o-mini")
MODEL_OPTIONS: dict[str, Any] = (
    {"mock_response": os.environ["CHAT_MOCK_RESPONSE"]}
    if "CHAT_MOCK_RESPONSE" in os.environ
    else {}
)
#: Answers running in the background (kept referenced until they end).
running: set[asyncio.Task[None]] = set()


def weather(city: str) -> dict[str, Any]:
    """The current weather of a city.

    Args:
        city: the city's name
    """
    return {"city": city, "sky": "sunny", "celsius": 21}


def user_store(request: Request) -> ctxstore.store.AsyncUserStore:
    """The store as the request's user sees it."""
    return store.for_user(request.headers.get("x-user-id", "demo"))


def engine_for(request: Request, chat_id: str, **options: Any) -> ctxstore.AsyncContextEngine:
    engine = ctxstore.AsyncContextEngine(store=user_store(request), chat_id=chat_id, **options)
    engine.set(ctxstore.role("You are a helpful assistant. Use the weather tool for weather."))
    return engine


async def post_chat(request: Request) -> Response:
    body = await request.json()
    chat_id = body["id"]
    try:
        stream = await achat(
            engine_for(request, chat_id),
            body.get("messages") or [],
            model=MODEL,
            tools=[weather],
            trigger=body.get("trigger", "submit-message"),
            message_id=body.get("messageId"),
            generate_title=True,
            **MODEL_OPTIONS,
        )
    except ctxstore.ValidationError as error:
        return JSONResponse({"error": str(error)}, status_code=400)

    async def answer() -> None:
        async for _chunk in stream:  # to the end, whoever listens
            pass

    task = asyncio.create_task(answer())
    running.add(task)
    task.add_done_callback(running.discard)
    events = await aresume_sse(user_store(request), chat_id, stream.stream_id)
    return StreamingResponse(events, headers=UI_MESSAGE_STREAM_HEADERS)


async def resume(request: Request) -> Response:
    chat_id = request.path_params["chat_id"]
    after = request.headers.get("last-event-id")
    try:
        events = await aresume_sse(user_store(request), chat_id, after=after)
    except ctxstore.ValidationError as error:
        return JSONResponse({"error": str(error)}, status_code=400)
    if events is None:
        return Response(status_code=204)
    return StreamingResponse(events, headers=UI_MESSAGE_STREAM_HEADERS)


async def stop(request: Request) -> Response:
    chat_id = request.path_params["chat_id"]
    return JSONResponse({"stopped": await astop_stream(user_store(request), chat_id)})


async def chats(request: Request) -> Response:
    found = await user_store(request).list_chats(limit=50)
    return JSONResponse([{"id": c.id, "title": c.title, "updatedAt": c.updated_at} for c in found])


async def messages(request: Request) -> Response:
    chat_id = request.path_params["chat_id"]
    try:
        await user_store(request).get_chat(chat_id)
    except ctxstore.NotFoundError:
        return JSONResponse({"error": "no such chat"}, status_code=404)
    # each message with versions says which it is ("< 2/3 >")
    context = await engine_for(request, chat_id).resolve()
    return JSONResponse(context.ui_messages)


app = Starlette(
    routes=[
        Route("/api/chat", post_chat, methods=["POST"]),
        Route("/api/chat/{chat_id}/stream", resume, methods=["GET"]),
        Route("/api/chat/{chat_id}/stop", stop, methods=["POST"]),
        Route("/api/chats", chats, methods=["GET"]),
        Route("/api/chat/{chat_id}", messages, methods=["GET"]),
    ]
)
