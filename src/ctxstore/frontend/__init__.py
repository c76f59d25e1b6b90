"""The chat backend's front door: a ``useChat`` frontend's turns answered with the AI SDK's UI
message stream, from the store.

- :func:`chat` / :func:`achat`: one turn (the seed's ``chat()``): the new message placed, the
  model and its tools run in a loop, the chunks streamed (:class:`ChatStream`), mirrored into
  Redis, and the answer saved as one ``UIMessage``;
- :func:`resume_sse` / :func:`aresume_sse`: an answer replayed for a reconnecting client;
- :func:`stop_stream` / :func:`astop_stream`: an answer stopped from any worker;
- :func:`preload`: what a first request would load, loaded at a server's start.
"""

from ctxstore.frontend.plan import DEFAULT_ERROR_TEXT
from ctxstore.frontend.preloading import preload
from ctxstore.frontend.protocol import UI_MESSAGE_STREAM_HEADERS
from ctxstore.frontend.resume import aresume_sse, astop_stream, resume_sse, stop_stream
from ctxstore.frontend.streams import AsyncChatStream, ChatStream, achat, chat

__all__ = [
    "DEFAULT_ERROR_TEXT",
    "UI_MESSAGE_STREAM_HEADERS",
    "AsyncChatStream",
    "ChatStream",
    "achat",
    "aresume_sse",
    "astop_stream",
    "chat",
    "preload",
    "resume_sse",
    "stop_stream",
]
