"""The peers' own classes, standing in as ctxstore's: what the swapped suites import.

``SQLiteSession(session_id, db_path=":memory:", ...)`` is a :class:`CtxStoreSession` under the
SDK's name (so its messages, "SQLiteSession is closed", read as the SDK's): one store per
database, as SQLite has one file per path. ``PEER_URL`` names the backend: ``memory://`` (a
named embedded store per path, private for ``":memory:"``) or a Redis URL (a namespace per
path).
"""

from __future__ import annotations

import hashlib
import os
import uuid
from pathlib import Path
from typing import Any

import ctxstore
from ctxstore.integrations.langchain import CtxStoreChatMessageHistory
from ctxstore.integrations.openai_agents import CtxStoreSession

#: The owner of every chat the suites write.
PEER_USER = "peer"


def _store_for(db_path: str | Path) -> ctxstore.Store:
    base = os.environ.get("PEER_URL", "memory://")
    private = str(db_path) == ":memory:"
    name = uuid.uuid4().hex if private else hashlib.sha1(str(db_path).encode()).hexdigest()
    if base.startswith("memory://"):
        return ctxstore.connect(f"memory://peer-{name}")
    return ctxstore.connect(base, namespace=f"peer-{name[:16]}")


class SQLiteSession(CtxStoreSession):
    """The OpenAI Agents SDK's ``SQLiteSession`` signature over a ctxstore chat."""

    def __init__(
        self,
        session_id: str,
        db_path: str | Path = ":memory:",
        create_tables: bool = False,  # noqa: ARG002 - the SDK's signature; nothing to create
        *,
        logger: Any = None,  # noqa: ARG002 - the SDK's signature; ctxstore logs as "ctxstore"
        session_settings: Any = None,
    ) -> None:
        super().__init__(
            session_id,
            user_id=PEER_USER,
            store=_store_for(db_path),
            session_settings=session_settings,
        )
        self._owns_store = True


def _namespace_store(key: str, ttl: int | None = None) -> ctxstore.Store:
    """The store for one of the peer's databases, named by ``key`` (a client's identity and key
    prefix, an engine, a URL): the same key, the same chats; another key, other chats. ``ttl``:
    the retention of the chats it creates, as ``RedisSession(ttl=)`` sets its keys'."""
    name = hashlib.sha1(key.encode()).hexdigest()
    base = os.environ.get("PEER_URL", "memory://")
    if base.startswith("memory://"):
        return ctxstore.connect(f"memory://peer-{name}", ttl=ttl)
    return ctxstore.connect(base, namespace=f"peer-{name[:16]}", ttl=ttl)


class RedisSession(CtxStoreSession):
    """The OpenAI Agents SDK's ``RedisSession`` signature over a ctxstore chat: one namespace
    per client and ``key_prefix``, as the SDK keeps one key space per prefix."""

    def __init__(
        self,
        session_id: str,
        *,
        redis_client: Any,
        key_prefix: str = "agents:session",
        ttl: int | None = None,
        session_settings: Any = None,
    ) -> None:
        super().__init__(
            session_id,
            user_id=PEER_USER,
            store=_namespace_store(f"redis {id(redis_client)} {key_prefix}", ttl),
            session_settings=session_settings,
        )
        # As the SDK's: the client passed in is the caller's, so close() leaves the session
        # usable; from_url's is the session's own.
        self._owns_store = False

    @property
    def _owns_client(self) -> bool:
        """The SDK's name for who owns the connection (its tests check their setup by it)."""
        return self._owns_store

    @classmethod
    def from_url(
        cls,
        session_id: str,
        *,
        url: str,
        redis_kwargs: dict[str, Any] | None = None,  # noqa: ARG003 - the SDK's signature
        session_settings: Any = None,
        **kwargs: Any,
    ) -> RedisSession:
        session = cls(session_id, redis_client=url, session_settings=session_settings, **kwargs)
        session._owns_store = True
        return session

    async def ping(self) -> bool:
        """A read of the session: True when the store answers."""
        try:
            await self.get_items(limit=1)
        except ctxstore.errors.BackendUnavailableError:
            return False
        return True

    async def close(self) -> None:  # type: ignore[override]
        super().close()


class SQLAlchemySession(CtxStoreSession):
    """The OpenAI Agents SDK's ``SQLAlchemySession`` signature over a ctxstore chat: one
    namespace per engine (a private one for an in-memory SQLite URL, as each engine of
    ``sqlite:///:memory:`` has its own database)."""

    def __init__(
        self,
        session_id: str,
        *,
        engine: Any,
        create_tables: bool = False,  # noqa: ARG002 - the SDK's signature; nothing to create
        sessions_table: str = "agent_sessions",
        messages_table: str = "agent_messages",
        session_settings: Any = None,
        ensure_ascii: bool = True,  # noqa: ARG002 - ctxstore stores text as given
    ) -> None:
        url = str(getattr(engine, "url", engine))
        key = uuid.uuid4().hex if ":memory:" in url else url
        super().__init__(
            session_id,
            user_id=PEER_USER,
            store=_namespace_store(f"sql {key} {sessions_table} {messages_table}"),
            session_settings=session_settings,
        )
        self._owns_store = True

    @classmethod
    def from_url(
        cls,
        session_id: str,
        *,
        url: str,
        engine_kwargs: dict[str, Any] | None = None,  # noqa: ARG003 - the SDK's signature
        session_settings: Any = None,
        **kwargs: Any,
    ) -> SQLAlchemySession:
        return cls(session_id, engine=url, session_settings=session_settings, **kwargs)


class InMemoryChatMessageHistory(CtxStoreChatMessageHistory):
    """LangChain's ``InMemoryChatMessageHistory(messages=None)`` over a ctxstore chat of its own
    (a new chat id per history, as each in-memory history is its own list)."""

    def __init__(self, messages: Any = None) -> None:
        store = _namespace_store("langchain")
        super().__init__(f"history-{uuid.uuid4().hex}", user_id=PEER_USER, store=store)
        if messages:
            self.add_messages(messages)

    def __eq__(self, other: object) -> bool:
        """As the peer's (a pydantic model of its messages): equal when the messages are, every
        field of each (id, name, kwargs and metadata) compared."""
        if not isinstance(other, InMemoryChatMessageHistory):
            return NotImplemented
        return self.messages == other.messages

    __hash__ = None  # type: ignore[assignment]  # equal by value, as the peer's
