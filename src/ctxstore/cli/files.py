"""Files for ``ctxstore export`` and ``ctxstore import``: JSON Lines out and in.

An export to a file is written to a temporary file beside it and renamed over it once complete,
so a failed export (a chat that does not exist, a lost connection) never leaves a file that
looks like an export; ``-`` (or no ``-o``) streams to stdout as the chunks are read. An import
reads one record a line (``-`` reads stdin); record N is line N, which is what errors name.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, Protocol

from ctxstore._core.format.portable import loads_line


class FileProblemError(Exception):
    """A file could not be read or written (reported as one line, exit code 1)."""


def write_text(path: str | None, chunks: Iterable[str]) -> None:
    """Write ``chunks`` (UTF-8) to ``path``, or to stdout for None or ``-``, as they come."""
    if path is None or path == "-":
        out = _stdout_bytes()
        for chunk in chunks:
            out.write(chunk.encode("utf-8"))
        out.flush()
        return
    target = Path(path)
    try:
        handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent or ".")
    except OSError as error:
        raise FileProblemError(f"cannot write {path}: {error.strerror or error}") from None
    try:
        with os.fdopen(handle, "wb") as out:
            for chunk in chunks:
                out.write(chunk.encode("utf-8"))
        os.replace(temporary, target)
    except OSError as error:
        os.unlink(temporary)
        raise FileProblemError(f"cannot write {path}: {error.strerror or error}") from None
    except BaseException:
        os.unlink(temporary)
        raise


class _ByteSink(Protocol):
    def write(self, data: bytes, /) -> int: ...

    def flush(self) -> None: ...


def _stdout_bytes() -> _ByteSink:
    sys.stdout.flush()
    buffer = getattr(sys.stdout, "buffer", None)
    if buffer is None:  # a text-only stream (some embedding): write through it
        return _TextAsBytes(sys.stdout)
    sink: _ByteSink = buffer
    return sink


class _TextAsBytes:
    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream

    def write(self, data: bytes) -> int:
        return self._stream.write(data.decode("utf-8"))

    def flush(self) -> None:
        self._stream.flush()


@contextmanager
def opened_lines(path: str) -> Iterator[Iterator[Any]]:
    """The records of a JSON Lines file (``-``: stdin), parsed one line at a time."""
    if path == "-":
        yield _records(sys.stdin.buffer)
        return
    try:
        stream = open(path, "rb")  # noqa: SIM115 - closed below, after the import read it
    except OSError as error:
        raise FileProblemError(f"cannot read {path}: {error.strerror or error}") from None
    with stream:
        yield _records(stream)


def _records(stream: IO[bytes]) -> Iterator[Any]:
    for number, line in enumerate(stream, start=1):
        yield loads_line(line, number)
