"""The context engine: one chat's context for one user, on a sync or an async store.

:class:`ContextEngine` / :class:`AsyncContextEngine` render context fragments into a system
prompt, read the active branch (from its newest summary on) and save what a turn adds, each in
one round trip; :meth:`~ContextEngine.turn` holds a turn together across workers and
:meth:`~ContextEngine.stream_turn` streams an answer that another process can follow.
"""

from ctxstore.engine.engines import AsyncContextEngine, ContextEngine
from ctxstore.engine.streamed import AsyncStreamedTurn, StreamedTurn
from ctxstore.engine.titles import agenerate_chat_title, generate_chat_title, static_chat_title
from ctxstore.engine.turns import AsyncTurn, Turn

__all__ = [
    "AsyncContextEngine",
    "AsyncStreamedTurn",
    "AsyncTurn",
    "ContextEngine",
    "StreamedTurn",
    "Turn",
    "agenerate_chat_title",
    "generate_chat_title",
    "static_chat_title",
]
