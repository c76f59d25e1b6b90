"""A session of the OpenAI Agents SDK kept in ctxstore: ``CtxStoreSession``.

::

    from agents import Agent, Runner
    from ctxstore.integrations.openai_agents import CtxStoreSession

    session = CtxStoreSession("chat-1", user_id="alice", url="redis://localhost:6379")
    result = await Runner.run(agent, "Plan a weekend in Lisbon.", session=session)

The session is the chat ``session_id`` owned by ``user_id`` (created by the first write;
another user's chat reads as one that does not exist, and writing to it is a
:class:`~ctxstore.errors.ChatNotFoundError`), and its items are the
chain of the chat's *active branch*, read anew at every call: a rewind made through a
``ContextEngine`` shows at the next ``get_items``. Items are stored exactly as the SDK gives
them (messages, ``function_call``, ``function_call_output``, ``reasoning``, ...), their own
``"id"`` included; ctxstore gives each its own message id.

- ``get_items(limit=None)``: the newest ``limit`` items, oldest first (``limit`` None: the
  session settings' limit, else all; 0 or less: none). One round trip.
- ``add_items(items)``: one append to the branch active when it runs, by compare-and-set with
  ``on_conflict="rebase"``: any number of workers on one session lose nothing. One round trip
  (four for the write that creates the chat).
- ``pop_item()``: moves the head back, like a rewind: the newest item stays in the graph on the
  branch it was popped from, and a new branch (``main-v2``, ``main-v3``, ...: repeated pops do
  not nest) starts at its parent and becomes active, by compare-and-set on the active branch
  and its head: two pops at once take two distinct items. Returns the item (None on an empty
  session). Two round trips. An item appended by another worker while a pop runs stays on the
  branch the pop left.
- ``clear_session()``: deletes the chat, every branch with it.
- ``close()``: as the SDK's sessions, by who owns the connection: one opened from ``url=`` is
  closed and the session ends (later calls raise :class:`SessionClosedError`); a store passed
  in is the caller's, and ``close()`` changes nothing.

``store=`` takes a user's handle (``store.for_user(user_id)``: the user is the handle's), or a
:class:`~ctxstore.store.Store` or an :class:`~ctxstore.store.AsyncStore` with ``user_id=``
(``url=`` instead opens a sync store, which serves any event loop, as ``Runner.run_sync``'s
needs). On a sync store each call runs in a worker thread (``asyncio.to_thread``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, cast

try:
    from agents.items import TResponseInputItem
    from agents.memory import SessionSettings
except ImportError as error:  # pragma: no cover - exercised without the extra installed
    raise ImportError(
        "ctxstore.integrations.openai_agents needs the OpenAI Agents SDK: "
        "pip install 'ctxstore[openai-agents]'"
    ) from error

from ctxstore.errors import CtxStoreError, ValidationError
from ctxstore.integrations._branch_log import BranchLog, open_store
from ctxstore.store.async_store import AsyncStore
from ctxstore.store.scoped import AsyncUserStore, UserStore
from ctxstore.store.sync_store import Store

__all__ = ["CtxStoreSession", "SessionClosedError", "SessionSettingsError"]


class SessionSettingsError(ValidationError, TypeError):
    """``session_settings`` names a setting the SDK does not have (``{"limitt": 1}``), or is not
    settings at all: a ``TypeError``, as the SDK's own sessions raise, and a ctxstore
    ``ValidationError``."""


class SessionClosedError(CtxStoreError, RuntimeError):
    """A call on a session after its ``close()``: a ``RuntimeError``, as the SDK's sessions
    raise."""


class CtxStoreSession:
    """An OpenAI Agents SDK ``Session`` on a ctxstore chat's active branch (see the module)."""

    session_settings: SessionSettings | None = None

    def __init__(
        self,
        session_id: str,
        *,
        user_id: str | None = None,
        store: Store | AsyncStore | UserStore | AsyncUserStore | None = None,
        url: str | None = None,
        session_settings: SessionSettings | Mapping[str, Any] | None = None,
    ) -> None:
        self.session_id = session_id
        self.session_settings = _settings(session_settings)
        self._owns_store = store is None
        self._closed = False
        opened, acting = open_store(store, url, "CtxStoreSession", user_id)
        self._log = BranchLog(opened, session_id, acting)

    @property
    def store(self) -> Store | AsyncStore:
        return self._log.store

    @property
    def user_id(self) -> str:
        return self._log.user_id

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The newest ``limit`` items of the active branch, oldest first (None: the session
        settings' limit, else every item)."""
        self._check_open()
        if limit is None and self.session_settings is not None:
            limit = self.session_settings.limit
        items = await self._log.arun(self._log.read(limit))
        return cast("list[TResponseInputItem]", items)

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append ``items`` in order to the active branch, unchanged."""
        self._check_open()
        payloads = [_payload(item, index) for index, item in enumerate(items)]
        await self._log.arun(self._log.extend(payloads, any_items=True))

    async def pop_item(self) -> TResponseInputItem | None:
        """Move the head back by one item (a rewind: the item stays in the graph) and return
        it; None on an empty session."""
        self._check_open()
        item = await self._log.arun(self._log.pop())
        return cast("TResponseInputItem | None", item)

    async def clear_session(self) -> None:
        """Delete the chat."""
        self._check_open()
        await self._log.arun(self._log.clear())

    def close(self) -> None:
        """End the session, by the SDK's rule for who owns the connection: a session that opened
        its store (``url=``) closes it, and every later call raises
        :class:`SessionClosedError`, as ``SQLiteSession`` and ``RedisSession.from_url`` do; with
        a store passed in (``store=``) the caller owns it and ``close()`` changes nothing, as
        ``RedisSession`` with an injected client. Closing twice is harmless."""
        if self._closed or not self._owns_store:
            return
        self._closed = True
        if isinstance(self.store, Store):
            self.store.close()

    def _check_open(self) -> None:
        if self._closed:
            raise SessionClosedError(f"{type(self).__name__} is closed")


def _settings(value: SessionSettings | Mapping[str, Any] | None) -> SessionSettings:
    """The settings, as the SDK's sessions take them: a dict may name only the settings'
    fields (a misspelt one would silently apply nothing)."""
    if value is None:
        return SessionSettings()
    if isinstance(value, SessionSettings):
        return value
    if isinstance(value, Mapping):
        known = {field.name for field in dataclasses.fields(SessionSettings)}
        unknown = sorted(str(name) for name in value if name not in known)
        if unknown:
            raise SessionSettingsError(f"Unknown session settings: {', '.join(unknown)}")
        return SessionSettings(**value)
    raise SessionSettingsError(
        f"session_settings must be a SessionSettings or a dict, got {type(value).__name__}"
    )


def _payload(item: object, index: int) -> Mapping[str, Any]:
    """An item as the SDK gives it: a dict (a pydantic model from the SDK is dumped)."""
    if isinstance(item, Mapping):
        return item
    dump = getattr(item, "model_dump", None)
    if callable(dump):
        dumped = dump(exclude_unset=True)
        if isinstance(dumped, Mapping):
            return dumped
    raise ValidationError(f"items[{index}] must be an input item dict, got {type(item).__name__}")
