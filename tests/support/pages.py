"""The code blocks of the README and of the documentation site (``docs/*.md``).

A block is a fence at the start of a line: three backticks and a language, the code, three
backticks. ``python`` blocks are examples the tests run; ``bash`` blocks are commands and
``text`` blocks are program output, usage lines or layouts, shown and never run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"

#: The languages a fence may name: what runs, and what is only shown.
LANGUAGES = ("python", "bash", "text")

_FENCE = re.compile(r"^```(\S*)\s*$")


@dataclass(frozen=True)
class Block:
    """One fenced block: its page (relative to the repository), its language, the line its
    code starts on, and the code."""

    page: str
    language: str
    line: int
    code: str


def pages() -> list[Path]:
    """The README, then every page of the site, in name order."""
    return [README, *sorted(DOCS.glob("*.md"))]


def blocks(path: Path) -> list[Block]:
    """Every fenced block of a page, in order; an unclosed fence is an error."""
    page = path.relative_to(ROOT).as_posix()
    found: list[Block] = []
    opened: tuple[str, int] | None = None
    lines: list[str] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        fence = _FENCE.match(line)
        if opened is None and fence:
            opened, lines = (fence.group(1), number + 1), []
        elif opened is not None and line.rstrip() == "```":
            found.append(Block(page, opened[0], opened[1], "".join(f"{x}\n" for x in lines)))
            opened = None
        elif opened is not None:
            lines.append(line)
    if opened is not None:
        raise ValueError(f"{page}:{opened[1] - 1}: a fence is never closed")
    return found


def python_blocks(path: Path) -> list[Block]:
    """The examples of a page: its ``python`` blocks."""
    return [block for block in blocks(path) if block.language == "python"]
