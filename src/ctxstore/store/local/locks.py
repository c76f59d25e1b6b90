"""The two ``flock`` locks of a local store directory (see :mod:`ctxstore.store.local.place`).

``flock`` locks belong to an open file, not to a process, and the kernel drops them when the
last descriptor of that file closes, however its holder ended. So a lock file is never stale in
the sense of a pid file: a lock nobody holds is simply free, and the file is never deleted.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ctxstore.errors import BackendUnavailableError

_POLL_SECONDS = 0.01


def is_held(lock: Path) -> bool:
    """Whether a process holds ``lock`` exclusively (a running server holds its server lock).

    The probe takes a shared lock for an instant: it never keeps a starter from its exclusive
    one for longer than two system calls, and it fails only against an exclusive holder.
    """
    try:
        descriptor = os.open(lock, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(descriptor, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(descriptor)  # also drops the shared lock
    return False


def open_lock(lock: Path) -> int:
    """A descriptor of ``lock`` (created with mode 0600), to lock with :func:`take`."""
    return os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)


def take(descriptor: int, *, within: float) -> bool:
    """Lock ``descriptor`` exclusively, trying for ``within`` seconds; False if it stayed held."""
    deadline = time.monotonic() + within
    while True:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(_POLL_SECONDS)


@contextmanager
def exclusively(lock: Path, *, within: float, doing: str) -> Iterator[None]:
    """Hold ``lock`` for the block; a :class:`BackendUnavailableError` when another process
    kept it for ``within`` seconds (``doing`` says what it was doing, for the message)."""
    descriptor = open_lock(lock)
    try:
        if not take(descriptor, within=within):
            raise BackendUnavailableError(
                f"another process has been {doing} for {within:g} s (it holds {str(lock)!r})"
            )
        yield
    finally:
        os.close(descriptor)
