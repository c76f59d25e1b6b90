"""A LangChain chat message history kept in ctxstore: ``CtxStoreChatMessageHistory``.

::

    from ctxstore.integrations.langchain import CtxStoreChatMessageHistory
    from langchain_core.runnables.history import RunnableWithMessageHistory

    chain = RunnableWithMessageHistory(
        model,
        lambda session_id: CtxStoreChatMessageHistory(session_id, user_id="alice", store=store),
    )

The history is the chat ``session_id`` owned by ``user_id`` (created by the first write;
another user's chat reads as one that does not exist, and writing to it is a
:class:`~ctxstore.errors.ChatNotFoundError`), and its messages are
the chain of the chat's *active branch*, read anew at each call: a rewind made through a
``ContextEngine`` shows at the next read. Messages are stored as OpenAI-format chat dicts
(``convert_to_openai_messages``; ``convert_to_messages`` reads them back), so the same chat works
with the engine, ``resolve()`` and ``litellm.completion``: tool calls and tool messages keep
their ids and arguments. What the OpenAI format has no place for is kept beside each message, in
its ctxstore metadata under ``"langchain"``, and restored on read: the message's ``id``,
``name``, ``additional_kwargs``, ``response_metadata``, ``usage_metadata``, and the role of a
``ChatMessage`` (a custom role such as ``"critic"`` reads back as the ``ChatMessage`` it was;
the engine sees it as a message of that role).

- ``messages`` / ``aget_messages()``: the whole active branch, one round trip.
- ``add_messages`` / ``aadd_messages``: one append to the branch active when it runs, by
  compare-and-set with ``on_conflict="rebase"``: any number of workers lose nothing.
- ``clear`` / ``aclear``: deletes the chat (every branch); the next write creates it anew.

``store=`` takes a user's handle (``store.for_user(user_id)``: the user is the handle's), or a
:class:`~ctxstore.store.Store` or an :class:`~ctxstore.store.AsyncStore` with ``user_id=``
(``url=`` instead opens a sync store). On a sync store the async methods run in a worker thread;
on an AsyncStore only the async methods work (a sync one raises ConfigurationError).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

try:
    from langchain_core.chat_history import BaseChatMessageHistory
    from langchain_core.messages import (
        BaseMessage,
        ChatMessage,
        convert_to_messages,
        convert_to_openai_messages,
    )
except ImportError as error:  # pragma: no cover - exercised without the extra installed
    raise ImportError(
        "ctxstore.integrations.langchain needs langchain-core: pip install 'ctxstore[langchain]'"
    ) from error

from ctxstore.errors import ValidationError
from ctxstore.integrations._branch_log import BranchLog, open_store
from ctxstore.store.async_store import AsyncStore
from ctxstore.store.scoped import AsyncUserStore, UserStore
from ctxstore.store.sync_store import Store

__all__ = ["CtxStoreChatMessageHistory"]


class CtxStoreChatMessageHistory(BaseChatMessageHistory):
    """A ``BaseChatMessageHistory`` on a ctxstore chat's active branch (see the module)."""

    def __init__(
        self,
        session_id: str,
        *,
        user_id: str | None = None,
        store: Store | AsyncStore | UserStore | AsyncUserStore | None = None,
        url: str | None = None,
    ) -> None:
        self.session_id = session_id
        self._owns_store = store is None
        opened, acting = open_store(store, url, "CtxStoreChatMessageHistory", user_id)
        self._log = BranchLog(opened, session_id, acting)

    @property
    def store(self) -> Store | AsyncStore:
        return self._log.store

    @property
    def user_id(self) -> str:
        return self._log.user_id

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """The messages of the active branch, oldest first."""
        return _to_messages(self._log.run(self._log.read_stored()))

    async def aget_messages(self) -> list[BaseMessage]:
        return _to_messages(await self._log.arun(self._log.read_stored()))

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Append ``messages`` in order to the active branch, as OpenAI-format dicts."""
        self._log.run(self._log.extend(*_to_payloads(messages)))

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        await self._log.arun(self._log.extend(*_to_payloads(messages)))

    def clear(self) -> None:
        """Delete the chat."""
        self._log.run(self._log.clear())

    async def aclear(self) -> None:
        await self._log.arun(self._log.clear())

    def close(self) -> None:
        """Close the store this history opened from ``url=`` (a store passed in stays open)."""
        if self._owns_store and isinstance(self.store, Store):
            self.store.close()


#: The metadata key under which a message keeps what its OpenAI-format payload cannot hold.
EXTRAS_KEY = "langchain"
#: The fields of a LangChain message restored from the extras (when the message had them).
_KEPT = ("id", "name", "additional_kwargs", "response_metadata", "usage_metadata")


def _to_payloads(
    messages: Sequence[BaseMessage],
) -> tuple[list[dict[str, Any]], list[dict[str, Any] | None]]:
    """Each message as an OpenAI-format payload, and the metadata that keeps the rest."""
    for index, message in enumerate(messages):
        if not isinstance(message, BaseMessage):
            raise ValidationError(
                f"messages[{index}] must be a LangChain message, got {type(message).__name__}"
            )
    converted = convert_to_openai_messages(list(messages))
    payloads = [dict(payload) for payload in converted]
    return payloads, [_extras(message) for message in messages]


def _extras(message: BaseMessage) -> dict[str, Any] | None:
    kept = {
        name: value
        for name in _KEPT
        if (value := getattr(message, name, None)) not in (None, {}, "")
    }
    if isinstance(message, ChatMessage):
        kept["chat_role"] = message.role
    return {EXTRAS_KEY: kept} if kept else None


def _to_messages(stored: list[dict[str, Any]]) -> list[BaseMessage]:
    return [_to_message(item["message"], item.get("metadata")) for item in stored]


def _to_message(payload: dict[str, Any], metadata: dict[str, Any] | None) -> BaseMessage:
    kept = (metadata or {}).get(EXTRAS_KEY) or {}
    role = kept.get("chat_role")
    if isinstance(role, str):
        message: BaseMessage = ChatMessage(content=payload.get("content") or "", role=role)
    else:
        try:
            message = convert_to_messages([payload])[0]
        except ValueError:  # a role LangChain has no class for, stored without its extras
            message = ChatMessage(
                content=payload.get("content") or "", role=str(payload.get("role"))
            )
    for name in _KEPT:
        if name in kept and hasattr(message, name):
            setattr(message, name, kept[name])
    return message
