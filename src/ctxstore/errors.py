"""The ctxstore exception tree.

Every error ctxstore raises derives from :class:`CtxStoreError`, so one ``except`` clause catches
them all, while the subclasses let callers react to what actually happened (retry on a conflict,
404 on not-found, 403 on permission). Errors that Redis reports are translated in exactly one
place (:mod:`ctxstore._core.failures`) and keep the redis-py exception as ``__cause__``.

Validation and not-found errors also derive from the matching built-in (``ValueError``,
``LookupError``) so code that already catches those keeps working.

The tree::

    CtxStoreError
    ├── ValidationError (ValueError)
    │   ├── InvalidIdError
    │   ├── PayloadTooLargeError
    │   └── UnserializablePayloadError (TypeError)
    ├── ConfigurationError (ValueError)
    │   └── ScopeError                 a chat call that names no owner, on a plain store
    ├── NotFoundError (LookupError)
    │   ├── ChatNotFoundError          missing, or another user's: the same error
    │   │   └── ChatReplacedError
    │   ├── BranchNotFoundError, MessageNotFoundError, CheckpointNotFoundError
    │   └── StreamNotFoundError
    ├── ConflictError
    │   ├── HeadConflictError, EmptyBranchError, MessageExistsError, BranchExistsError
    │   ├── ChatBusyError, LeaseLostError
    ├── StreamFailedError
    ├── PermissionDeniedError          what a user's handle may not do
    ├── CorruptionError
    ├── FormatError                    another release's storage format, not read here
    ├── KeyUnavailableError            what opens a sealed record is gone (a user erased)
    ├── LimitExceededError
    └── BackendError
        ├── BackendUnavailableError    refused or dropped connection, cluster down
        │   └── BackendTimeoutError    no reply in time: a write may have been applied
        ├── BackendBusyError
        ├── BackendPermissionError     the server's ACL refused a command or key
        └── DurabilityError
"""

from __future__ import annotations

from typing import Any


class CtxStoreError(Exception):
    """Root of every error ctxstore raises."""

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details: dict[str, Any] = details


# --- bad input -------------------------------------------------------------------------------


class ValidationError(CtxStoreError, ValueError):
    """The caller's input is malformed; nothing was written."""


class InvalidIdError(ValidationError):
    """An id or name is empty, too long, or holds a character that could escape its key."""


class PayloadTooLargeError(ValidationError):
    """An encoded message or metadata value is over the configured size limit."""


class UnserializablePayloadError(ValidationError, TypeError):
    """A payload holds a value msgpack cannot encode (a set, a datetime, an arbitrary object...).

    Also a ``TypeError``, what ``json.dumps`` raises for such a value, and what frameworks'
    own stores raise (the OpenAI Agents SDK's sessions): code written against them keeps
    working."""


class ConfigurationError(CtxStoreError, ValueError):
    """The store was set up wrongly: a bad URL, a client that decodes replies, a missing extra."""


class ScopeError(ConfigurationError):
    """A chat call on a plain :class:`~ctxstore.store.Store` did not say whose chat it is.

    Raised before anything is sent. The three ways out: pass ``user_id=``, call it on
    ``store.for_user(user_id)`` (a request handler's handle), or on ``store.admin()`` (an
    operator's handle, on which no owner means any owner)."""


# --- state of the data -----------------------------------------------------------------------


class NotFoundError(CtxStoreError, LookupError):
    """The chat, branch, message or checkpoint does not exist."""


class ChatNotFoundError(NotFoundError):
    """No chat has this id (in this namespace)."""


class ChatReplacedError(ChatNotFoundError):
    """The chat the caller knew is gone: deleted, or deleted and re-created under the same id
    (each creation gives a chat a new incarnation). Nothing was read or written; open it anew."""


class BranchNotFoundError(NotFoundError):
    """The chat has no branch of this name."""


class MessageNotFoundError(NotFoundError):
    """The chat holds no message with this id."""


class CheckpointNotFoundError(NotFoundError):
    """The chat has no checkpoint of this name."""


class StreamNotFoundError(NotFoundError):
    """The chat has no answer stream of this id: it never had one, or the stream expired (a
    finished stream is kept for a while after its end, see ``engine.stream_turn``)."""


class ConflictError(CtxStoreError):
    """The write does not fit the current state; nothing was written."""


class HeadConflictError(ConflictError):
    """The branch head moved since the caller read it.

    ``current_head`` is the head now (None for an empty branch): re-read, or append with
    ``on_conflict="rebase"`` / ``"fork"``.
    """

    def __init__(
        self,
        message: str,
        *,
        branch: str,
        expected_head: str | None,
        current_head: str | None,
        **details: Any,
    ) -> None:
        super().__init__(
            message,
            branch=branch,
            expected_head=expected_head,
            current_head=current_head,
            **details,
        )
        self.branch = branch
        self.expected_head = expected_head
        self.current_head = current_head


class EmptyBranchError(ConflictError):
    """The operation needs a message to start from, and the branch has none yet."""


class MessageExistsError(ConflictError):
    """A message with this id is already in the chat; messages are immutable."""


class BranchExistsError(ConflictError):
    """A branch with this name already exists."""


class ChatBusyError(ConflictError):
    """Another turn holds the chat's turn lease (``engine.turn(strategy="reject")`` at once,
    ``"enqueue"`` after waiting). ``expires_at``: when that lease runs out (epoch ms)."""

    def __init__(self, message: str, *, expires_at: int, **details: Any) -> None:
        super().__init__(message, expires_at=expires_at, **details)
        self.expires_at = expires_at


class LeaseLostError(ConflictError):
    """A write of a turn whose lease another turn has taken since (its fencing token is stale):
    nothing was written. The engine keeps its pending messages; a later ``save()`` outside the
    turn stores them on a side branch, never on the line the new turn writes."""


class StreamFailedError(CtxStoreError):
    """An answer stream ended without its answer: the model call or the consumer failed, the
    consumer stopped reading, or its writer stopped writing (a crashed worker) and its deadline
    passed. ``reason`` says which; nothing of that answer was saved."""

    def __init__(self, message: str, *, reason: str, **details: Any) -> None:
        super().__init__(message, reason=reason, **details)
        self.reason = reason


class PermissionDeniedError(CtxStoreError):
    """A handle was asked for what its scope does not allow: an admin handle, or another
    user's engine, from a :class:`~ctxstore.store.UserStore`. Nothing was read or written.

    Another user's chat is never this error: it is a :class:`ChatNotFoundError` exactly like a
    chat that does not exist. A refusal by the server's ACL is a :class:`BackendPermissionError`.
    """


class CorruptionError(CtxStoreError):
    """Stored data is not what ctxstore wrote: undecodable records, a cycle, a dangling parent."""


class FormatError(CtxStoreError):
    """A chat or the keyspace is in a storage format this release does not read or write:
    another release of ctxstore wrote it (docs/compatibility.md). Not corruption: the data is
    intact and the release named in the message reads it. Details: ``found`` (the format met),
    ``reads`` (the formats this release reads), ``release`` (this release) and ``install``
    (the release that reads ``found``, when the keyspace marker names it)."""


class KeyUnavailableError(CtxStoreError):
    """A sealed record's key cannot be had: the key provider no longer holds what unwraps it
    (its user was erased, which destroys the key for good; or its key-encryption key was
    removed from the provider). Not corruption: nothing opens it, by design. Details:
    ``subject`` (the user) and ``key_id``."""


class LimitExceededError(CtxStoreError):
    """An operation reached one of its safety bounds (for example the chain depth limit)."""


# --- the backend -----------------------------------------------------------------------------


class BackendError(CtxStoreError):
    """Redis failed in a way that is not about the caller's data."""


class BackendUnavailableError(BackendError):
    """Redis cannot be reached (refused, dropped, cluster down), or did not reply in time
    (:class:`BackendTimeoutError`)."""


class BackendTimeoutError(BackendUnavailableError):
    """A command was sent and its reply did not come in time: a write may have been applied.

    Retrying it with the same ``request_id`` (``append(request_id=...)``; an engine's
    ``save()`` keeps its own across retries) is safe: the chat applies it once."""


class BackendPermissionError(BackendError):
    """The server's ACL refused a command or a key to the Redis user the store connects as
    (``NOPERM``): the deployment's configuration, not the caller's data. ``command`` names the
    command (or script) and ``key`` the key when known."""

    def __init__(
        self, message: str, *, command: str | None, key: str | None, **details: Any
    ) -> None:
        super().__init__(message, command=command, key=key, **details)
        self.command = command
        self.key = key


class BackendBusyError(BackendError):
    """Redis is up but cannot serve now (busy script, loading, out of memory); retry later."""


class DurabilityError(BackendError):
    """A write of a store connected with ``durability=`` was applied on the primary, but the
    replica (``"replica"``: ``WAIT``) or the local fsync (``"aof"``: ``WAITAOF``) did not confirm
    it within ``durability_timeout``: it may or may not survive a failover (or a crash).

    It did not fail: the write exists on the primary and the call ran to its end (an engine's
    state moved on as after a save). Read before writing it again. ``result`` is what the call
    returned on the primary.
    """

    def __init__(self, message: str, *, result: Any = None, **details: Any) -> None:
        super().__init__(message, **details)
        self.result = result


__all__ = [
    "BackendBusyError",
    "BackendError",
    "BackendPermissionError",
    "BackendTimeoutError",
    "BackendUnavailableError",
    "BranchExistsError",
    "BranchNotFoundError",
    "ChatBusyError",
    "ChatNotFoundError",
    "ChatReplacedError",
    "CheckpointNotFoundError",
    "ConfigurationError",
    "ConflictError",
    "CorruptionError",
    "CtxStoreError",
    "DurabilityError",
    "EmptyBranchError",
    "HeadConflictError",
    "InvalidIdError",
    "LeaseLostError",
    "LimitExceededError",
    "MessageExistsError",
    "MessageNotFoundError",
    "NotFoundError",
    "PayloadTooLargeError",
    "PermissionDeniedError",
    "ScopeError",
    "StreamFailedError",
    "StreamNotFoundError",
    "UnserializablePayloadError",
    "ValidationError",
]
