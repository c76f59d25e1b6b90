"""What the sync and the async store share besides their operations: the client, the state,
the process cache, the routing of pipelined commands, and the scope rule (see
:mod:`ctxstore.store.sync_store` for the shells themselves).

The scope rule: a chat call names its owner, or is an operator's on purpose. On a plain
:class:`~ctxstore.store.Store` a chat call without ``user_id`` is a
:class:`~ctxstore.errors.ScopeError`, raised before anything is sent; on the handle
``store.admin()`` returns, leaving the owner out means any owner; ``store.for_user(user_id)``
returns a handle whose calls have no ``user_id`` parameter at all (:mod:`ctxstore.store.scoped`).
"""

from __future__ import annotations

from typing import Any, TypeVar

from ctxstore._core.state import StoreState
from ctxstore.errors import ScopeError
from ctxstore.store.connection import pipeline_router

ShellT = TypeVar("ShellT", bound="StoreShell")


class StoreShell:
    """The members of :class:`~ctxstore.store.Store` and :class:`~ctxstore.store.AsyncStore`
    that do no I/O."""

    #: Whether a chat call without ``user_id`` acts on any owner's chat (an admin handle).
    any_owner = False

    def __init__(self, client: Any, state: StoreState, *, owns_client: bool) -> None:
        self._client = client
        self._state = state
        self._owns_client = owns_client
        self._route = pipeline_router(client)

    @property
    def client(self) -> Any:
        """The redis-py (or fakeredis) client underneath."""
        return self._client

    @property
    def state(self) -> StoreState:
        """The store's internal state (settings, key names, caches) for code that runs the
        operations of ``ctxstore._core`` itself: an internal, unstable API."""
        return self._state

    def clear_cache(self) -> None:
        """Forget the chains this process read through stores of this URL (the next read of each
        chat reads its whole chain). Messages are immutable, so this is never needed for
        correctness; it frees memory, and benchmarks use it to measure a cold read."""
        self._state.cache.clear()

    def _owner(self, user_id: str | None, method: str) -> str | None:
        """The owner a chat call acts as: ``user_id``, or on a plain store a ScopeError when
        it is None (an admin handle takes None as any owner)."""
        if user_id is None and not self.any_owner:
            raise ScopeError(
                f"{type(self).__name__}.{method}() acts on one user's chat and was not told "
                f"whose: pass user_id=..., call it on store.for_user(user_id) (a request "
                f"handler's handle), or on store.admin() (an operator's, on which no owner "
                f"means any owner); nothing was sent",
                method=method,
            )
        return user_id

    def _admin_only(self, method: str) -> None:
        """Refuse, on a plain store, a call that acts on any owner's chat by its nature."""
        if not self.any_owner:
            raise ScopeError(
                f"{type(self).__name__}.{method}() acts on any user's chat: call it on "
                f"store.admin(), the operator's handle; nothing was sent",
                method=method,
            )
