"""Loading the Lua scripts and reading their KEYS/ARGV contracts.

Scripts live in ``lua/`` at the top of the repository and ship inside the wheel as
``ctxstore/lua`` (hatchling force-include), so both a checkout and an installed package find them.
Each entry script is prefixed with the helpers of ``_prelude.lua`` it uses (directly or through
other helpers) before hashing, so one operation is always one EVALSHA. Only those: Redis runs a
script's whole text on every call, and defining every helper cost about 5 microseconds a call.

The header comment of each script names its keys (``-- KEYS[1] chat``); the loader parses it and
callers build their key list from those names, which keeps Python and Lua from drifting apart.
"""

from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

PRELUDE = "_prelude.lua"
_KEY_LINE = re.compile(r"^-- KEYS\[(\d+)\]\s+(\w+)(\s+optional:)?", re.MULTILINE)
_ARG_LINE = re.compile(r"^-- ARGV\[(\d+)(?:\.\.)?\]\s+(\S+)", re.MULTILINE)


@dataclass(frozen=True)
class LuaScript:
    """One entry script: its name, full source (prelude included), SHA1 and declared keys."""

    name: str
    source: str
    sha: str
    key_names: tuple[str, ...]
    arg_names: tuple[str, ...]
    #: How many of ``key_names`` every call passes; the rest are optional (``optional:`` in the
    #: header) and passed together or not at all.
    required_keys: int


def script_dir() -> Path:
    """The folder holding the ``.lua`` files: inside the installed package, else the checkout."""
    packaged = Path(str(resources.files("ctxstore"))) / "lua"
    if (packaged / PRELUDE).is_file():
        return packaged
    checkout = Path(__file__).resolve().parents[3] / "lua"
    if (checkout / PRELUDE).is_file():
        return checkout
    raise FileNotFoundError(f"ctxstore Lua scripts not found in {packaged} or {checkout}")


def parse_contract(name: str, text: str) -> tuple[tuple[str, ...], tuple[str, ...], int]:
    """The KEYS and ARGV names declared in a script header, in order, and the required key count.

    KEYS must be numbered 1..n without gaps: a script that reads KEYS[3] while its header names
    only two keys is exactly the drift this check exists to catch. Optional keys come last.
    """
    keys = [(int(index), key, bool(optional)) for index, key, optional in _KEY_LINE.findall(text)]
    if [index for index, _, _ in keys] != list(range(1, len(keys) + 1)):
        raise ValueError(f"{name}: KEYS in the header must be numbered 1..n, got {keys}")
    required = sum(1 for _, _, optional in keys if not optional)
    if any(optional for _, _, optional in keys[:required]):
        raise ValueError(f"{name}: optional KEYS must come after the required ones")
    args = [arg for _, arg in _ARG_LINE.findall(text)]
    return tuple(key for _, key, _ in keys), tuple(args), required


_DEFINITION = re.compile(r"^local (?:function )?(\w+)", re.MULTILINE)
_WORD = re.compile(r"\w+")


def prelude_blocks(prelude: str) -> list[tuple[str, str]]:
    """The prelude cut into its top-level definitions: (name, text with its leading comments)."""
    starts = [match.start() for match in _DEFINITION.finditer(prelude)]
    blocks = []
    for index, start in enumerate(starts):
        end = starts[index + 1] if index + 1 < len(starts) else len(prelude)
        text = prelude[start:end]
        # Comment lines right above the next definition belong to it, not to this one.
        lines = text.rstrip("\n").split("\n")
        while lines and lines[-1].startswith("--"):
            lines.pop()
        name = _DEFINITION.match(prelude, start)
        assert name is not None
        blocks.append((name.group(1), "\n".join(lines).rstrip() + "\n"))
    return blocks


def needed_prelude(prelude: str, body: str) -> str:
    """The prelude definitions ``body`` uses, directly or through each other, in prelude order."""
    blocks = prelude_blocks(prelude)
    defined = dict(blocks)
    needed: set[str] = set()
    pending = [word for word in _WORD.findall(body) if word in defined]
    while pending:
        name = pending.pop()
        if name not in needed:
            needed.add(name)
            pending += [word for word in _WORD.findall(defined[name]) if word in defined]
    return "\n".join(text for name, text in blocks if name in needed)


@functools.cache
def load_script(name: str) -> LuaScript:
    """Load ``lua/<name>.lua`` with the prelude helpers it uses; cached for the process's life."""
    folder = script_dir()
    body = (folder / f"{name}.lua").read_text(encoding="utf-8")
    prelude = (folder / PRELUDE).read_text(encoding="utf-8")
    key_names, arg_names, required = parse_contract(name, body)
    source = f"{needed_prelude(prelude, body)}\n{body}"
    sha = hashlib.sha1(source.encode("utf-8")).hexdigest()
    return LuaScript(name, source, sha, key_names, arg_names, required)


def entry_script_names() -> list[str]:
    """Every entry script shipped with ctxstore (all ``.lua`` files but the prelude)."""
    return sorted(path.stem for path in script_dir().glob("*.lua") if path.name != PRELUDE)
