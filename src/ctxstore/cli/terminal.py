"""What the command line needs from the terminal: colour, a closed pipe, a confirmation.

Colour goes only to a terminal (a stream whose ``isatty()`` is true), never into a pipe or a
file, and never when ``NO_COLOR`` is set to anything but the empty string (https://no-color.org)
or ``TERM`` is ``dumb``. Each stream decides for itself: ``ctxstore log c1 2>errors.txt`` still
colours its output on the terminal.

A reader that stops early (``ctxstore log c1 | head -1``) closes the pipe; the next write raises
``BrokenPipeError``. :func:`silence_stdout` points the process's standard output at
``/dev/null`` so that the interpreter's own flush at exit does not fail again and print
"Exception ignored" on stderr; the command then exits quietly with 141 (128 + SIGPIPE), the code
of a program the signal ended, as ``git log | head -1`` does.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import IO

#: The exit code of a command whose reader closed the pipe (128 + SIGPIPE).
BROKEN_PIPE_EXIT = 141

_CODES = {
    "bold": "1",
    "dim": "2",
    "red": "31",
    "green": "32",
    "yellow": "33",
    "cyan": "36",
}


@dataclass(frozen=True)
class Style:
    """ANSI colours for one stream, or none (every method then returns the text as it is)."""

    enabled: bool = False

    @classmethod
    def for_stream(cls, stream: IO[str], environ: Mapping[str, str] | None = None) -> Style:
        """Colour when ``stream`` is a terminal, unless NO_COLOR (non-empty) or TERM=dumb."""
        env = os.environ if environ is None else environ
        if env.get("NO_COLOR") or env.get("TERM") == "dumb":
            return cls(False)
        try:
            return cls(bool(stream.isatty()))
        except (AttributeError, ValueError):  # no isatty, or a closed stream
            return cls(False)

    def paint(self, text: str, *names: str) -> str:
        """``text`` in the named colours and weights (``"bold"``, ``"green"``, ...)."""
        if not self.enabled or not text or not names:
            return text
        codes = ";".join(_CODES[name] for name in names)
        return f"\x1b[{codes}m{text}\x1b[0m"


def silence_stdout() -> None:
    """Send whatever is still to be written to stdout to /dev/null (after a broken pipe)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (AttributeError, OSError, ValueError):  # no real file behind stdout (tests)
        pass


def confirm(question: str, stdin: IO[str], stderr: IO[str]) -> bool:
    """Ask ``question`` on stderr and read the answer from stdin: true for y or yes."""
    stderr.write(f"{question} [y/N] ")
    stderr.flush()
    answer = stdin.readline()
    return answer.strip().lower() in ("y", "yes")
