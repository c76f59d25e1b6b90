"""The storage format's constants, kept in Lua and in Python, agree: each is parsed from the Lua
library and compared with the one :mod:`ctxstore._core.format` (or the id checks) use."""

from __future__ import annotations

import re
from typing import Any

import pytest

from ctxstore._base import ids
from ctxstore._core.format import chat, fields, jobs, records, summaries, tokens, versions
from ctxstore._core.scripts import script_dir
from ctxstore.messages import usage

#: ``local NAME = 123`` or ``local NAME = 'text'`` at the top level of a Lua file.
_CONSTANT = re.compile(r"^local ([A-Z][A-Z0-9_]*) = (-?[0-9]+|'[^']*')", re.MULTILINE)

#: Lua constant -> the Python value it must equal.
SHARED: dict[str, Any] = {
    "FORMAT": versions.FORMAT,
    "TAG_LENGTH": records.TAG_LENGTH,
    "MAX_ID_BYTES": ids.MAX_ID_BYTES,
    "MAX_EXACT": fields.MAX_COUNT,
    "MAX_COUNT": usage.MAX_COUNT,
    "TOK_WIDTH": tokens.TOK_WIDTH,
    "TOOL_RESULT": tokens.TOOL_RESULT,
    "MAX_CHAIN_TOKENS": tokens.MAX_CHAIN_TOKENS,
    "SUMMARY_TOKEN_BYTES": summaries.SUMMARY_TOKEN_BYTES,
    "JOB_STREAM_MAXLEN": jobs.JOB_STREAM_MAXLEN,
    "REQUEST_RING": chat.REQUEST_RING,
}


def lua_constants() -> dict[str, list[tuple[str, Any]]]:
    """Every top-level constant of the Lua scripts and library: name -> (file, value) each."""
    found: dict[str, list[tuple[str, Any]]] = {}
    root = script_dir()
    for path in sorted(root.rglob("*.lua")):
        for name, raw in _CONSTANT.findall(path.read_text(encoding="utf-8")):
            value: Any = raw[1:-1] if raw.startswith("'") else int(raw)
            found.setdefault(name, []).append((str(path.relative_to(root)), value))
    return found


@pytest.mark.parametrize("name", sorted(SHARED))
def test_a_constant_of_the_format_is_the_same_in_lua_and_python(name: str) -> None:
    defined = lua_constants().get(name)
    assert defined, f"{name} is no longer a constant of the Lua scripts"
    for where, value in defined:  # every file that defines it: one value
        assert value == SHARED[name], (where, name, value, SHARED[name])


def test_the_limits_python_checks_are_the_ones_the_scripts_hold() -> None:
    """Bounds derived from the shared constants, spelled out once more on the Python side."""
    assert tokens.MAX_CHAIN_TOKENS == (1 << (8 * (tokens.TOK_WIDTH - 1))) - 1
    assert summaries.MAX_SUMMARY_TOKENS == (1 << (8 * summaries.SUMMARY_TOKEN_BYTES)) - 1
