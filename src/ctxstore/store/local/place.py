"""Where a ``local://`` store lives: the directory, the files ctxstore keeps in it, and the checks
that refuse a directory it cannot use before anything is started or written.

The directory holds the server's append-only files and five of ctxstore's own:

* ``ctxstore.sock``: the server's unix socket (no TCP port: nothing else on the machine, and
  nothing on the network, reaches it; ``unixsocketperm 700`` keeps other users out);
* ``server.lock``: locked (``flock``) by the running server itself, which inherits the lock from
  the process that started it, so the lock is held exactly as long as that server lives: a
  server killed by any means frees it, and a lock nobody holds is a stale one to take over. It
  is never deleted;
* ``start.lock``: held by whoever is starting a server, so two processes that start at once
  start one;
* ``server.json``: what ``ctxstore local status`` shows (pid, binary, idle timeout);
* ``server.log``: the server's log and its keeper's.

A unix socket's path is limited to about 100 bytes. A deeper directory is reached through a
short symbolic link in a private per-user folder (``$XDG_RUNTIME_DIR``, else the temporary
directory), named by a hash of the directory; the server binds a relative path in its own
working directory, so it is never limited.
"""

from __future__ import annotations

import hashlib
import os
import pwd
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ctxstore.errors import ConfigurationError

SOCKET_NAME = "ctxstore.sock"
SERVER_LOCK = "server.lock"
START_LOCK = "start.lock"
INFO_FILE = "server.json"
LOG_FILE = "server.log"

#: Permissions are this process's own (its effective ids) where the system can say so.
_EFFECTIVE = os.access in os.supports_effective_ids
#: sun_path holds 108 bytes on Linux and 104 on macOS, the terminating NUL included.
_MAX_SOCKET_PATH = 100


@dataclass(frozen=True)
class Place:
    """The checked, absolute directory of one local store and the paths of its files."""

    directory: Path

    @property
    def socket_file(self) -> Path:
        return self.directory / SOCKET_NAME

    @property
    def server_lock(self) -> Path:
        return self.directory / SERVER_LOCK

    @property
    def start_lock(self) -> Path:
        return self.directory / START_LOCK

    @property
    def info_file(self) -> Path:
        return self.directory / INFO_FILE

    @property
    def log_file(self) -> Path:
        return self.directory / LOG_FILE

    @property
    def url(self) -> str:
        """``local://`` and the absolute directory: the same for every spelling of the path."""
        return f"local://{self.directory}"

    def socket_path(self) -> str:
        """The path a client connects to: the socket itself, or a short link to it."""
        direct = str(self.socket_file)
        if len(os.fsencode(direct)) <= _MAX_SOCKET_PATH:
            return direct
        return _short_link(self.socket_file)


def place_of(path: str, *, create: bool) -> Place:
    """The checked directory ``path`` names (``~`` expanded, relative to the working directory).

    ``create`` makes a missing directory (mode 0700), as a first ``connect`` does; ``ctxstore
    local status`` and ``stop`` never create one. Refused with a :class:`ConfigurationError`
    naming the path: a path that is not a directory, one this user cannot write to, and one
    whose server belongs to another user (its socket would refuse this user anyway, and its
    files are not this user's to take over).
    """
    if not path:
        raise ConfigurationError(
            "local:// needs a directory: local://PATH (e.g. local://./ctxdata)"
        )
    directory = Path(os.path.realpath(os.path.expanduser(path)))
    try:
        exists = directory.exists()
    except OSError as error:  # a folder on the way this user may not enter
        raise ConfigurationError(
            f"cannot reach the local store path {str(directory)!r}: {error.strerror}"
        ) from error
    if exists and not directory.is_dir():
        raise ConfigurationError(f"local store path {str(directory)!r} is not a directory")
    if not exists:
        if not create:
            raise ConfigurationError(f"local store path {str(directory)!r} does not exist")
        try:
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as error:
            raise ConfigurationError(
                f"cannot create the local store directory {str(directory)!r}: {error.strerror}"
            ) from error
    if not os.access(directory, os.W_OK | os.X_OK, effective_ids=_EFFECTIVE):
        raise ConfigurationError(
            f"local store directory {str(directory)!r} is not writable by this user"
        )
    _check_owner(directory / SERVER_LOCK, directory)
    return Place(directory)


def _check_owner(lock: Path, directory: Path) -> None:
    try:
        owner = lock.stat().st_uid
    except FileNotFoundError:
        return
    if owner != os.geteuid():
        raise ConfigurationError(
            f"local store directory {str(directory)!r} is held by a server of another user "
            f"({_user_name(owner)}); use a directory of your own"
        )


def _user_name(uid: int) -> str:
    try:
        return f"{pwd.getpwuid(uid).pw_name}, uid {uid}"
    except KeyError:
        return f"uid {uid}"


def _short_link(socket_file: Path) -> str:
    """A short symbolic link to ``socket_file`` in a folder only this user may use."""
    base = Path(os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir())
    folder = base / f"ctxstore-{os.geteuid()}"
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        info = folder.lstat()
    except OSError as error:
        raise ConfigurationError(
            f"the socket path {str(socket_file)!r} is too long for a unix socket, and the "
            f"short link to it cannot be made in {str(folder)!r}: {error.strerror}"
        ) from error
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o077:
        raise ConfigurationError(
            f"the socket path {str(socket_file)!r} is too long for a unix socket, and "
            f"{str(folder)!r}, where its short link goes, is not a private folder of this user"
        )
    digest = hashlib.sha256(os.fsencode(str(socket_file))).hexdigest()[:24]
    link = folder / f"{digest}.sock"
    if not link.is_symlink() or os.readlink(link) != str(socket_file):
        spare = folder / f"{digest}.{os.getpid()}.tmp"
        spare.unlink(missing_ok=True)
        spare.symlink_to(socket_file)
        os.replace(spare, link)  # atomic: a concurrent client sees the old link or the new one
    return str(link)
