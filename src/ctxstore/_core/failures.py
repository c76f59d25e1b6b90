"""The one place where Redis errors become ctxstore errors.

Scripts report domain errors as ``CTX_<CODE> <json>`` error replies; redis-py raises every error
reply as ``ResponseError``. Connection failures, timeouts, busy servers and Cluster outages arrive
as other redis-py exceptions. :func:`translate` maps all of them onto the tree in
:mod:`ctxstore.errors`; the caller raises the result ``from`` the original so it stays the cause.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import redis.exceptions as rexc

from ctxstore import errors
from ctxstore._core.format.sealed import ResealNeededError, sealed_chat_error
from ctxstore._core.format.versions import chat_format_error

_SCRIPT_ERROR_PREFIX = "CTX_"

_NOT_FOUND: dict[str, type[errors.NotFoundError]] = {
    "chat": errors.ChatNotFoundError,
    "branch": errors.BranchNotFoundError,
    "message": errors.MessageNotFoundError,
    "checkpoint": errors.CheckpointNotFoundError,
    "stream": errors.StreamNotFoundError,
}

#: What a transport call can raise: redis-py errors (RedisClusterException is not a RedisError)
#: and raw socket errors.
TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (
    rexc.RedisError,
    rexc.RedisClusterException,
    OSError,
)

#: Error reply prefixes of a server that is up but cannot serve right now.
_BUSY_PREFIXES = ("BUSY", "LOADING", "OOM", "TRYAGAIN", "MASTERDOWN", "READONLY")


def is_noscript(error: BaseException) -> bool:
    """True when the server does not know a script's SHA (after SCRIPT FLUSH or a restart)."""
    return isinstance(error, rexc.NoScriptError) or (
        isinstance(error, rexc.ResponseError) and str(error).startswith("NOSCRIPT")
    )


def _server_text(error: object) -> str | None:
    """The text of a server's own error reply (None for anything else): ctxstore's domain
    errors (``CTX_...``) echo ids and names a caller chose, so no classification below ever
    reads them."""
    if not isinstance(error, rexc.ResponseError):
        return None
    text = str(error)
    return None if text.startswith(_SCRIPT_ERROR_PREFIX) else text


def is_function_missing(error: object) -> bool:
    """True when the server has functions but not the one called (the library is not loaded
    on this node: a new server, a promoted replica, ``FUNCTION FLUSH``): the server's exact
    reply, ``Function not found``."""
    text = _server_text(error)
    return text is not None and text.removeprefix("ERR ").strip() == "Function not found"


def is_library_present(error: object) -> bool:
    """True when ``FUNCTION LOAD`` was refused because the library is already there (another
    process loaded it first): as good as loaded."""
    text = _server_text(error)
    return text is not None and bool(_LIBRARY_EXISTS.match(text.removeprefix("ERR ")))


_LIBRARY_EXISTS = re.compile(r"Library '[\w]+' already exists")

#: A command refused as a command: Redis 6 (or a service that disables it) does not know it,
#: or the user's ACL does not allow it. Redis names the command in both replies.
_UNKNOWN_COMMAND = re.compile(r"(ERR )?unknown (sub)?command [`']?(\w+)", re.IGNORECASE)
_NO_PERMISSION_TO_RUN = re.compile(r"(NOPERM )?.*no permissions to run the '([\w|]+)' command")


def _refused_commands(error: object) -> str | None:
    """The command a server refused to run at all (lowercase), or None: an unknown command or
    subcommand, or an ACL's NOPERM for the command (not for a key)."""
    text = _server_text(error)
    if text is None:
        return None
    unknown = _UNKNOWN_COMMAND.match(text)
    if unknown is not None:
        return unknown.group(3).lower()
    refused = _NO_PERMISSION_TO_RUN.match(text)
    return refused.group(2).lower() if refused is not None else None


def refuses_functions(error: object) -> bool:
    """True when ``FCALL`` / ``FCALL_RO`` / ``FUNCTION LOAD`` was refused as a command (Redis 6's
    unknown command, an ACL without it): the server or the user has no functions. A function
    that ran and failed, a busy or full server, or a domain error is no such refusal."""
    refused = _refused_commands(error)
    return refused is not None and refused.split("|")[0] in (
        "fcall",
        "fcall_ro",
        "function",
        "load",
    )


def refuses_command(error: object) -> bool:
    """True when a command itself was refused (an ACL without ``EVALSHA``, a server that does
    not know it), not something the script it ran did."""
    return _refused_commands(error) is not None


def is_wrong_type(error: object) -> bool:
    """True when Redis refused a command (or a script's command) for a key holding another
    type than the command works on."""
    return isinstance(error, rexc.ResponseError) and "WRONGTYPE" in str(error)


def translate(
    error: BaseException,
    context: Mapping[str, Any] | None = None,
    *,
    command: str | None = None,
    keys: tuple[str, ...] = (),
) -> errors.CtxStoreError:
    """The ctxstore error for a redis-py exception; ``context`` (chat id, ...) enriches messages,
    ``command`` and ``keys`` (what was sent) name what an ACL refused."""
    ctx = dict(context or {})
    if isinstance(error, errors.CtxStoreError):
        return error
    text = str(error)
    if isinstance(error, rexc.ClusterDownError) or text.startswith("CLUSTERDOWN"):
        return errors.BackendUnavailableError(f"the Redis Cluster is down: {text}", **ctx)
    if isinstance(error, rexc.NoPermissionError) or text.startswith("NOPERM"):
        return _refused_by_acl(text, ctx, command, keys)
    if isinstance(error, rexc.ResponseError):
        if text.startswith(_SCRIPT_ERROR_PREFIX):
            return _domain_error(text, ctx)
        if isinstance(error, rexc.AskError) or text.startswith(("MOVED ", "ASK ")):
            return errors.ConfigurationError(
                f"the server is a Redis Cluster node ({text}); connect with redis+cluster://",
                **ctx,
            )
        if text.startswith(_BUSY_PREFIXES):
            return errors.BackendBusyError(f"Redis cannot serve now: {text}", **ctx)
        return errors.BackendError(f"Redis refused the command: {text}", **ctx)
    if isinstance(error, rexc.BusyLoadingError):
        return errors.BackendBusyError(f"Redis is loading its data: {text}", **ctx)
    if isinstance(error, (rexc.TimeoutError, TimeoutError)):
        # Sent, and no reply in time (a connect that timed out sent nothing, but redis-py does
        # not tell the two apart): the command may have run.
        return errors.BackendTimeoutError(
            f"Redis did not reply in time ({text or type(error).__name__}): a write may have been "
            "applied; retrying it with the same request_id is safe (it is applied once)",
            **ctx,
        )
    if isinstance(error, (rexc.ConnectionError, rexc.ClusterDownError)):
        return errors.BackendUnavailableError(f"Redis is unreachable: {text}", **ctx)
    if isinstance(error, (rexc.ClusterError, rexc.RedisClusterException)):
        return errors.BackendUnavailableError(f"the Redis Cluster cannot serve: {text}", **ctx)
    if isinstance(error, (ConnectionError, OSError)):
        return errors.BackendUnavailableError(f"Redis is unreachable: {text}", **ctx)
    return errors.BackendError(f"Redis failed: {text}", **ctx)


_QUOTED = re.compile(r"'([^']*)'")


def _shared_start(keys: tuple[str, ...]) -> str:
    """The characters every key starts with (a chat's keys: its prefix and hash tag)."""
    first, last = min(keys), max(keys)
    end = 0
    while end < min(len(first), len(last)) and first[end] == last[end]:
        end += 1
    return first[:end]


def _refused_by_acl(
    text: str, ctx: dict[str, Any], command: str | None, keys: tuple[str, ...]
) -> errors.BackendPermissionError:
    """A refusal by the server's ACL, naming the command and the key where they can be known:
    Redis names the command it refused (``... to run the 'hvals' command``) and, from 7.2 on, a
    key; otherwise the command is what was sent, and the key the one it touched when it touched
    one. Never a chat-level error: a misconfigured server must not look like "not your chat"."""
    named = _QUOTED.findall(text)
    refused_command = named[0] if "command" in text and named else command
    refused_key = None
    if "key" in text:
        refused_key = next((name for name in named if name in keys), None)
        if refused_key is None and len(set(keys)) == 1:
            refused_key = keys[0]
    if refused_key:
        where = f" on key {refused_key!r}"
    elif keys:
        where = f" on one of its keys ({_shared_start(keys)}...)"
    else:
        where = ""
    return errors.BackendPermissionError(
        f"the server's ACL refused {refused_command or 'a command'}{where} to this Redis user "
        f"(check the user's command and key permissions, deploy/acl.conf): {text}",
        **ctx,
        command=refused_command,
        key=refused_key,
    )


def _domain_error(text: str, ctx: dict[str, Any]) -> errors.CtxStoreError:
    code, _, payload = text[len(_SCRIPT_ERROR_PREFIX) :].partition(" ")
    try:
        details: dict[str, Any] = json.loads(payload) if payload else {}
    except ValueError:
        details = {"raw": payload}
    chat = ctx.get("chat_id")
    where = f" in chat {chat!r}" if chat is not None else ""

    if code == "NOT_FOUND":
        what = str(details.get("what", "record"))
        cls = _NOT_FOUND.get(what, errors.NotFoundError)
        if what == "chat":
            return cls(f"chat {chat!r} does not exist", **ctx)
        return cls(
            f"{what} {details.get('id')!r} does not exist{where}", **ctx, id=details.get("id")
        )
    if code == "CONFLICT" and details.get("reason") == "stream_closed":
        state = details.get("state") or "gone"
        return errors.StreamFailedError(
            f"answer stream {details.get('stream')!r}{where} is no longer live ({state}): "
            "nothing was written",
            **ctx,
            reason=f"closed ({state})",
            stream_id=details.get("stream"),
        )
    if code == "CONFLICT":
        return _conflict(details, ctx, where)
    if code == "REPLACED":
        return errors.ChatReplacedError(
            f"chat {chat!r} was {details.get('reason', 'replaced')} since the caller read it",
            **ctx,
        )
    if code == "TAKEN":
        # Only opening (create or open) says it: the id is another user's chat. The call fails
        # as for a chat this caller cannot see; its message says why it cannot be created.
        return errors.ChatNotFoundError(
            f"chat {chat!r} cannot be opened: its id is not available to this user", **ctx
        )
    if code == "CORRUPT":
        key, field = details.get("key"), details.get("field")
        return errors.CorruptionError(
            f"corrupt data at {key} field {field!r}: {details.get('reason')}",
            **ctx,
            key=key,
            field=field,
        )
    if code in ("FORMAT", "RESEAL", "SEALED"):
        return _format_error(code, details, ctx)
    if code == "LIMIT":
        return errors.LimitExceededError(
            f"{details.get('what')} is over its limit of {details.get('limit')}{where}",
            **ctx,
            **details,
        )
    if code == "INVALID":
        return errors.ValidationError(f"{details.get('reason')}{where}", **ctx, **details)
    return errors.CtxStoreError(f"script error {code}: {details}{where}", **ctx)


def _format_error(code: str, details: dict[str, Any], ctx: dict[str, Any]) -> errors.CtxStoreError:
    """A chat of another format (FORMAT), records sealed for another place (RESEAL: the append
    seals them again), records in the clear for a sealed chat (SEALED)."""
    chat = ctx.get("chat_id")
    if code == "RESEAL":
        return ResealNeededError(str(details.get("layout")), **ctx)
    if code == "SEALED":
        return sealed_chat_error(chat)
    return chat_format_error(str(details.get("format")), chat_id=chat)


def _conflict(details: dict[str, Any], ctx: dict[str, Any], where: str) -> errors.ConflictError:
    reason = details.get("reason")
    if reason == "head":
        branch = str(details.get("branch"))
        expected = details.get("expected") or None
        current = details.get("current") or None
        return errors.HeadConflictError(
            f"branch {branch!r}{where} moved: expected head {expected!r}, current head {current!r}",
            branch=branch,
            expected_head=expected,
            current_head=current,
            **ctx,
        )
    if reason == "message_exists":
        message_id = details.get("id")
        return errors.MessageExistsError(
            f"message {message_id!r} already exists{where}; messages are immutable",
            **ctx,
            id=message_id,
        )
    if reason == "lease_lost":
        return errors.LeaseLostError(
            f"the turn's lease{where} was taken by another turn (fencing token "
            f"{details.get('fence') or '?'}, now {details.get('current') or 'none'}); "
            "nothing was written",
            **ctx,
            fence=details.get("fence"),
            current_fence=details.get("current"),
        )
    if reason == "branch_exists":
        name = details.get("branch")
        return errors.BranchExistsError(
            f"branch {name!r} already exists{where}", **ctx, branch=name
        )
    if reason == "request_reused":
        request = details.get("request")
        return errors.ConflictError(
            f"request id {request!r} was used{where} by a write of other messages: a retry "
            "sends the same messages under its request id, a new write takes a new one; "
            "nothing was written",
            **ctx,
            reason=reason,
            request_id=request,
        )
    if reason == "chat_exists":
        return errors.ConflictError(
            f"chat {ctx.get('chat_id')!r} exists already: import under another id, or delete "
            "it first; nothing was imported",
            **ctx,
            reason=reason,
        )
    if reason == "import_lost":
        return errors.ConflictError(
            f"the import{where} lost what it had staged (it expired, or a chunk went missing); "
            "nothing was imported",
            **ctx,
            reason=reason,
        )
    if reason in _SEALING:
        return errors.ConflictError(
            f"chat {ctx.get('chat_id')!r} {_SEALING[reason]}: nothing was sealed; run migrate "
            "--encrypt again",
            **ctx,
            **details,
        )
    return errors.ConflictError(f"conflict{where}: {details}", **ctx)


#: What a refused seal of a chat in the clear (``lua/seal_publish.lua``) says.
_SEALING = {
    "changed": "was written while it was sealed",
    "streaming": "has an answer being streamed into it",
    "seal_lost": "lost what its sealing had staged (it expired)",
}
