"""How a store's calls reach its server's Lua: as functions of the loaded library, or as scripts.

A server with Redis Functions (Redis 7.0 and later, Valkey 7.2 and later, the embedded store's
fakeredis 2.41) holds the ctxstore library (:func:`ctxstore._core.scripts.load_library`) once,
and each call runs only its function (``FCALL``, ``FCALL_RO`` for a read). The library is
loaded where a call finds its function missing (a new server, a replica promoted before it got
the library, ``FUNCTION FLUSH``), on that node, and the call is sent again, the way a
``NOSCRIPT`` reply is answered for a script.

Where functions are unavailable (Redis 6, a service that refuses ``FCALL`` or
``FUNCTION LOAD``, an ACL user without them) the store falls back to the ``EVALSHA`` scripts of
earlier releases, decided once per server (:class:`LuaDispatch`, shared through the process
registry) and logged. A user that may neither load the library nor run scripts (a tenant of
``deploy/acl.conf`` before an operator ran ``ctxstore functions load``) gets a
:class:`~ctxstore.errors.ConfigurationError` that says so, and the next call tries the
functions again.

The ``scripting`` setting forces a path: ``"functions"`` never falls back (a server without the
library loaded and loadable is an error), ``"scripts"`` never sends ``FCALL``.
"""

from __future__ import annotations

import logging
import threading

from ctxstore.errors import ConfigurationError
from ctxstore.settings import ScriptingMode

log = logging.getLogger("ctxstore")


class LuaDispatch:
    """Whether one server's calls go as functions or as scripts (shared by its stores).

    ``functions`` is read on every call without a lock (a bool); it changes once, through
    :meth:`fall_back`, when a call ran as a script where its function could not (logged
    once). A call that could run neither way changes nothing: the next one tries the
    functions again (an operator may load the library meanwhile).
    """

    def __init__(self, mode: ScriptingMode = "auto") -> None:
        self.mode: ScriptingMode = mode
        #: Calls go as ``FCALL`` / ``FCALL_RO`` (else as ``EVALSHA``).
        self.functions = mode != "scripts"
        #: Why the last fallback happened (None: calls use the functions, or were told not to).
        self.reason: str | None = None
        self._lock = threading.Lock()

    def may_fall_back(self) -> bool:
        """Whether a call refused as a function may go as a script."""
        return self.mode == "auto"

    def fall_back(self, reason: str) -> None:
        """Send calls as scripts from now on: the server cannot run (or load) the library."""
        with self._lock:
            if not self.functions:
                return
            self.functions, self.reason = False, reason
        hint = (
            " (an operator can load the library with `ctxstore functions load`)"
            if "FUNCTION LOAD" in reason
            else ""
        )
        # A server without functions (Redis 6, an embedded store of an older fakeredis) is
        # told at INFO; a user whose ACL refuses them, which an operator may want to change,
        # at WARNING.
        level = logging.WARNING if "no permissions" in reason else logging.INFO
        log.log(level, "ctxstore uses EVALSHA scripts on this server: %s%s", reason, hint)


def unloadable_error(library: str, cause: object) -> ConfigurationError:
    """The error of a store told to use functions only where they cannot run."""
    return ConfigurationError(
        f"scripting='functions', and this server cannot run ctxstore's library {library} for "
        f"this user ({cause}); an operator loads it with `ctxstore functions load`, or "
        f"scripting='auto' falls back to EVALSHA scripts",
        library=library,
    )


def neither_error(library: str, function_error: object, script_error: object) -> ConfigurationError:
    """The error of a user that can run neither the library's functions nor scripts."""
    return ConfigurationError(
        f"this server runs neither ctxstore's functions nor its scripts for this user: the "
        f"library {library} is not loaded and could not be loaded ({function_error}), and "
        f"EVALSHA was refused ({script_error}); an operator loads it with "
        f"`ctxstore functions load` (deploy/acl.conf gives tenants FCALL only)",
        library=library,
    )
