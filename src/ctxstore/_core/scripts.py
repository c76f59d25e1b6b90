"""Loading the Lua scripts and reading their KEYS/ARGV contracts.

Scripts live in ``lua/`` at the top of the repository and ship inside the wheel as
``ctxstore/lua`` (hatchling force-include), so both a checkout and an installed package find them.
``lua/<operation>.lua`` is one entry script per store operation; ``lua/lib/`` is the library of
helpers they share, one file per concern, read in the order ``LIBRARY`` declares (a Lua ``local``
exists only after its definition, so a file comes after the files it relies on;
``lua/lib/README.md`` describes the storage layout and the conventions every script follows).

The library is cut into its top-level ``local`` definitions, and each entry script is prefixed
with those it uses (directly or through other definitions), in library order, before hashing, so
one operation is always one EVALSHA. Only those: Redis runs a script's whole text on every call,
and defining every helper cost about 5 microseconds a call.

The same files make one Redis Functions library (:func:`load_library`): every library
definition once, then each entry script as a function of its keys and arguments, named after
the library (``ctxstore_<format>_<hash>_<operation>``; function names are global to a server,
so two releases' libraries live side by side). A script that runs only reading commands is
registered ``no-writes`` and called with ``FCALL_RO``. Loaded once per server, a call runs only
its function, where an ``EVALSHA`` runs its script's whole text, helpers included, on every
call. The per-script sources stay for servers without functions
(:mod:`ctxstore._core.dispatch`).

The header comment of each script names its keys (``-- KEYS[1] chat``); the loader parses it and
callers build their key list from those names, which keeps Python and Lua from drifting apart.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

#: The folder of ``lua/`` holding the library (``lua/lib/<name>.lua``).
LIBRARY_FOLDER = "lib"
#: The library files, in the order they are concatenated: each after every file it relies on.
#: The folder must hold exactly these (``read_library`` checks it).
LIBRARY: tuple[str, ...] = (
    "base",
    "checks",
    "branches",
    "msgpack",
    "runs",
    "summaries",
    "tokens",
    "lists",
    "chat",
    "requests",
    "reads",
    "retention",
    "streams",
    "jobs",
    "threads",
)

#: The commands that only read. A script (its library definitions included) that calls no other
#: command, and names every command it calls literally, is registered ``no-writes``: Redis then
#: refuses any write it might try, and it runs on a replica and under ``FCALL_RO``.
READ_COMMANDS = frozenset(
    {
        "EXISTS",
        "GET",
        "GETRANGE",
        "HEXISTS",
        "HGET",
        "HGETALL",
        "HKEYS",
        "HLEN",
        "HMGET",
        "HSTRLEN",
        "HVALS",
        "LINDEX",
        "LLEN",
        "LRANGE",
        "PTTL",
        "SCAN",
        "STRLEN",
        "TTL",
        "TYPE",
        "XLEN",
        "XRANGE",
        "XREVRANGE",
        "ZCARD",
        "ZCOUNT",
        "ZRANGE",
        "ZRANGEBYLEX",
        "ZRANGEBYSCORE",
        "ZREVRANGE",
        "ZREVRANGEBYLEX",
        "ZREVRANGEBYSCORE",
        "ZREVRANK",
        "ZRANK",
        "ZSCORE",
    }
)

#: Set (to anything but "" or "0") to load every script with a check, on each command it runs,
#: that the keys the command touches are among the script's KEYS, and that the script has KEYS
#: at all: what Redis Cluster, ElastiCache Serverless and other proxies require of a script,
#: proved on every call of a test run (.ci/run sets it for the Valkey pass). A violation is a
#: ``CTX_UNDECLARED`` error reply. The same setting checks the other rule of those services on
#: the client's side: no command carries more than 3,999 arguments
#: (:data:`ctxstore._core.protocol.MAX_COMMAND_ARGUMENTS`). Not for production: it costs a
#: lookup per command.
CHECK_KEYS_ENV = "CTXSTORE_CHECK_DECLARED_KEYS"

#: The commands the scripts run whose keys are not just their first argument (or that name
#: none: ``SCAN``).
_KEY_CHECK = """
if #KEYS == 0 then
  return redis.error_reply('CTX_UNDECLARED ' .. cjson.encode({reason = 'a script with no KEYS'}))
end
local ctx_declared = {}
for _, key in ipairs(KEYS) do
  ctx_declared[key] = true
end
local ctx_all_keys = {DEL = true, UNLINK = true, EXISTS = true}
local ctx_keyless = {SCAN = true}  -- scan_node.lua: a node's keys, named by none of its args
local function ctx_checked_call(command, ...)
  local args = {...}
  local upper = string.upper(command)
  local last = 1
  if ctx_keyless[upper] then
    last = 0
  elseif ctx_all_keys[upper] then
    last = #args
  elseif upper == 'RENAME' then
    last = 2
  end
  for i = 1, last do
    if not ctx_declared[args[i]] then
      error({ctx = 'CTX_UNDECLARED ' .. cjson.encode({command = upper, key = tostring(args[i]),
                                                      reason = 'not one of the KEYS'})})
    end
  end
  return redis.call(command, ...)
end
"""


#: The same check in a function library: the declared keys are the running function's, set by
#: ``ctx_declare`` when it starts (a function gets its keys as a parameter, not as KEYS).
_LIBRARY_KEY_CHECK = _KEY_CHECK.replace(
    """if #KEYS == 0 then
  return redis.error_reply('CTX_UNDECLARED ' .. cjson.encode({reason = 'a script with no KEYS'}))
end
local ctx_declared = {}
for _, key in ipairs(KEYS) do
  ctx_declared[key] = true
end
""",
    """local ctx_declared = {}
local function ctx_declare(keys)
  if #keys == 0 then
    return redis.error_reply('CTX_UNDECLARED ' .. cjson.encode({reason = 'a script with no KEYS'}))
  end
  ctx_declared = {}
  for _, key in ipairs(keys) do
    ctx_declared[key] = true
  end
end
""",
)
#: What a function runs first under the key check.
_DECLARE = "local ctx_refused = ctx_declare(KEYS)\nif ctx_refused then return ctx_refused end\n"


def with_key_check(source: str) -> str:
    """``source`` with every ``redis.call`` checked against the script's KEYS (see
    :data:`CHECK_KEYS_ENV`)."""
    return _KEY_CHECK + source.replace("redis.call(", "ctx_checked_call(")


def checking_service_rules() -> bool:
    """Whether :data:`CHECK_KEYS_ENV` asks for the managed-service checks (read once, when this
    module is imported: a library's name, its code and the scripts must agree)."""
    return _CHECKING


_CHECKING = os.environ.get(CHECK_KEYS_ENV, "") not in ("", "0")


_KEY_LINE = re.compile(r"^-- KEYS\[(\d+)\]\s+(\w+)(\s+optional:)?", re.MULTILINE)
_ARG_LINE = re.compile(r"^-- ARGV\[(\d+)(?:\.\.)?\]\s+(\S+)", re.MULTILINE)


@dataclass(frozen=True)
class LuaScript:
    """One entry script: its name, declared keys, its function in the library, and (made on
    first use: a server with functions never needs them) its full source as a script, the
    library definitions it uses included, and that source's SHA1."""

    name: str
    key_names: tuple[str, ...]
    arg_names: tuple[str, ...]
    #: How many of ``key_names`` every call passes; the rest are optional (``optional:`` in the
    #: header) and passed together or not at all.
    required_keys: int
    #: Its function's name in the library of this release (:func:`load_library`).
    function: str = ""
    #: It only reads: registered ``no-writes``, called with ``FCALL_RO``.
    read_only: bool = False

    @functools.cached_property
    def source(self) -> str:
        """What ``EVAL`` sends (where the server has no functions)."""
        return script_source(self.name)

    @functools.cached_property
    def sha(self) -> str:
        """What ``EVALSHA`` sends."""
        return hashlib.sha1(self.source.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class FunctionLibrary:
    """The Redis Functions library of this release: its name (``ctxstore_<format>_<hash>``),
    its code (what ``FUNCTION LOAD`` takes) and its functions, by entry script."""

    name: str
    code: str
    functions: tuple[str, ...]


def script_dir() -> Path:
    """The folder holding the ``.lua`` files: inside the installed package, else the checkout.
    Found from this file's place (not ``importlib.resources``, whose readers cost a fresh
    process a millisecond to import on its first call)."""
    here = Path(__file__).resolve()
    packaged = here.parents[1] / "lua"
    if _holds_scripts(packaged):
        return packaged
    checkout = here.parents[3] / "lua"
    if _holds_scripts(checkout):
        return checkout
    raise FileNotFoundError(f"ctxstore Lua scripts not found in {packaged} or {checkout}")


def _holds_scripts(folder: Path) -> bool:
    """Whether ``folder`` is a ``lua/`` folder: its library's first file is there."""
    return (folder / LIBRARY_FOLDER / f"{LIBRARY[0]}.lua").is_file()


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


_CALL_FIELD = re.compile(r"^--\s+call\.(\w+)(?:\s+`([^`\s]+)`)?", re.MULTILINE)
_REPLY_FIELD = re.compile(r"^--\s+reply\.(\w+)", re.MULTILINE)


def header_fields(body: str) -> tuple[list[tuple[str, str]], list[str]]:
    """The call fields (name, Lua pattern or "") and reply fields a script's header names
    (``-- call.<name>``, ``-- reply.<name>``; the header ends at the first blank line)."""
    header = body.split("\n\n", 1)[0]
    return _CALL_FIELD.findall(header), _REPLY_FIELD.findall(header)


#: The most captures a Lua pattern may hold (LUA_MAXCAPTURES): the most call fields a script
#: may take.
MAX_CALL_FIELDS = 32


def named_fields(name: str, body: str) -> str:
    """The Lua definitions of the fields ``body``'s header names (``lua/lib/README.md``):
    ``call_fields(text)``, its call fields by name (one ``string.match`` of a pattern made of
    each field's shape, then a table), and ``reply_of(values)``, the list its reply is of a
    table by name, in the header's order; "" for a script that names none."""
    calls, replies = header_fields(body)
    lines = []
    if calls:
        if len(calls) > MAX_CALL_FIELDS:
            raise ValueError(f"{name}: more than {MAX_CALL_FIELDS} call fields")
        if any(char in shape for _field, shape in calls for char in "'\\()"):
            raise ValueError(f"{name}: a call field's shape holds a quote, backslash or bracket")
        shapes = [shape or "[^\\t]*" for _field, shape in calls]  # Lua's \t: a tab
        pattern = "\\t".join(f"({shape})" for shape in shapes)
        values = ", ".join(f"v{index}" for index in range(len(calls)))
        named = ", ".join(f"{field} = v{index}" for index, (field, _) in enumerate(calls))
        lines += [
            "local function call_fields(text)",
            f"  local {values} = string.match(text, '^{pattern}$')",
            "  if v0 == nil then",
            "    fail('INVALID', {reason = 'malformed call fields'})",
            "  end",
            f"  return {{{named}}}",
            "end",
        ]
    if replies:
        listed = ", ".join(f"values.{field}" for field in replies)
        lines += ["local function reply_of(values)", f"  return {{{listed}}}", "end"]
    return "".join(f"{line}\n" for line in lines)


_DEFINITION = re.compile(r"^local (?:function )?(\w+)", re.MULTILINE)
_WORD = re.compile(r"\w+")


def definition_blocks(text: str) -> list[tuple[str, str]]:
    """One library file cut into its top-level definitions: (name, text), in file order.

    A definition's text runs from its ``local`` to the end of its body. The comments above a
    definition, and the file's header, are left out: they document the file, and every byte a
    script carries is parsed on every call.
    """
    starts = [match.start() for match in _DEFINITION.finditer(text)]
    blocks = []
    for index, start in enumerate(starts):
        end = starts[index + 1] if index + 1 < len(starts) else len(text)
        # Comment lines right above the next definition belong to it, not to this one.
        lines = text[start:end].rstrip("\n").split("\n")
        while lines and lines[-1].startswith("--"):
            lines.pop()
        name = _DEFINITION.match(text, start)
        assert name is not None
        blocks.append((name.group(1), "\n".join(lines).rstrip() + "\n"))
    return blocks


def library_blocks(files: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """The definitions of the library ``files`` ((file name, text) in library order), in order.

    A name defined twice is refused: both definitions would reach the scripts that use the name,
    and which one a script ran would depend on the order of the files.
    """
    defined_in: dict[str, str] = {}
    blocks = []
    for file_name, text in files:
        for name, block in definition_blocks(text):
            if name in defined_in:
                raise ValueError(
                    f"{LIBRARY_FOLDER}/{file_name}.lua defines {name}, "
                    f"already defined in {LIBRARY_FOLDER}/{defined_in[name]}.lua"
                )
            defined_in[name] = file_name
            blocks.append((name, block))
    return blocks


def read_library(folder: Path) -> list[tuple[str, str]]:
    """The library files of ``folder`` (a ``lua/lib``) as (file name, text), in ``LIBRARY`` order.

    The folder must hold exactly the files ``LIBRARY`` lists: a file it left out would never be
    read, and the scripts that use its definitions would fail only when they reach them.
    """
    present = {path.stem for path in folder.glob("*.lua")}
    unlisted, missing = sorted(present - set(LIBRARY)), sorted(set(LIBRARY) - present)
    if unlisted or missing:
        raise ValueError(
            f"{folder} must hold the library files LIBRARY lists: "
            f"not listed {unlisted}, missing {missing}"
        )
    return [(name, (folder / f"{name}.lua").read_text(encoding="utf-8")) for name in LIBRARY]


def needed_library(blocks: Sequence[tuple[str, str]], body: str) -> str:
    """The definitions of ``blocks`` that ``body`` uses, directly or through each other, in
    library order (a definition always comes after those it uses)."""
    needed = needed_names(tuple(blocks), body)
    return "\n".join(text for name, text in blocks if name in needed)


def needed_names(blocks: tuple[tuple[str, str], ...], body: str) -> set[str]:
    """The names of the definitions of ``blocks`` that ``body`` uses, directly or not."""
    uses = _uses(blocks)
    needed: set[str] = set()
    pending = [word for word in set(_WORD.findall(body)) if word in uses]
    while pending:
        name = pending.pop()
        if name not in needed:
            needed.add(name)
            pending += uses[name] - needed
    return needed


@functools.cache
def _uses(blocks: tuple[tuple[str, str], ...]) -> dict[str, set[str]]:
    """For each definition of ``blocks``, the other definitions its text names (read once)."""
    defined = {name for name, _text in blocks}
    return {name: set(_WORD.findall(text)) & defined - {name} for name, text in blocks}


@functools.cache
def _block_reads_only(blocks: tuple[tuple[str, str], ...]) -> dict[str, bool]:
    """For each definition of ``blocks``, whether it calls reading commands only."""
    return {name: reads_only(text) for name, text in blocks}


@functools.cache
def _library(folder: Path) -> tuple[tuple[str, str], ...]:
    """The library of the script folder ``folder``, cut once for every script loaded from it."""
    return tuple(library_blocks(_library_files(folder)))


_FLAGS = re.compile(r"^-- FLAGS\s+(no-writes)\b", re.MULTILINE)


def declares_no_writes(body: str) -> bool:
    """Whether a script's header declares it reads only (``-- FLAGS no-writes``): registered
    ``no-writes``, called with ``FCALL_RO``. A test checks each declaration against what the
    script and the definitions it uses call (:func:`script_reads_only`)."""
    return _FLAGS.search(body.split("\n\n", 1)[0]) is not None


_CALLED = re.compile(r"redis\.p?call\(\s*(?:'(\w+)'|\"(\w+)\"|)")


def reads_only(source: str) -> bool:
    """Whether every command ``source`` calls is named literally and in :data:`READ_COMMANDS`."""
    for single, double in _CALLED.findall(source):
        command = (single or double).upper()
        if command not in READ_COMMANDS:
            return False  # a write, or a command named by a variable ("" here)
    return True


@functools.cache
def _bodies(folder: Path) -> tuple[tuple[str, str], ...]:
    """Every entry script's own text (no library), by name, in name order."""
    names = sorted(path.stem for path in folder.glob("*.lua"))
    return tuple((name, (folder / f"{name}.lua").read_text(encoding="utf-8")) for name in names)


def _function_body(body: str, checking: bool) -> str:
    """An entry script as the body of a function of (KEYS, ARGV): the names it uses for its
    keys and arguments become the function's parameters, so the same text runs both ways."""
    return (_DECLARE if checking else "") + body


def library_code(
    blocks: Sequence[tuple[str, str]],
    bodies: Sequence[tuple[str, str]],
    *,
    checking: bool,
    named: str | None = None,
) -> FunctionLibrary:
    """The Functions library of ``blocks`` (library definitions, in order) and ``bodies``
    (entry scripts), every function named after the library: ``named``, or one made of its
    format and the SHA1 of its code."""
    parts = [text for _name, text in blocks]
    for operation, body in bodies:
        flags = ", flags = {'no-writes'}" if declares_no_writes(body) else ""
        registered = (
            f"redis.register_function{{function_name = LIBRARY .. '_{operation}'{flags}, "
            f"callback = function(KEYS, ARGV)\n{_function_body(body, checking)}\nend}}\n"
        )
        fields = named_fields(operation, body)  # defined once, as the function's upvalues
        parts.append(f"do\n{fields}{registered}end\n" if fields else registered)
    code = "\n".join(parts)
    if checking:  # the check's own call is the one left unchecked
        code = _LIBRARY_KEY_CHECK + code.replace("redis.call(", "ctx_checked_call(")
    name = named
    if name is None:
        digest = hashlib.sha1(code.encode("utf-8")).hexdigest()[:16]
        name = f"ctxstore_{_library_format(blocks)}_{digest}"
    header = f"#!lua name={name}\nlocal LIBRARY = '{name}'\n"
    return FunctionLibrary(name, header + code, tuple(f"{name}_{body}" for body, _ in bodies))


def script_reads_only(blocks: tuple[tuple[str, str], ...], body: str) -> bool:
    """Whether ``body`` and every definition it uses call reading commands only."""
    reading = _block_reads_only(blocks)
    return reads_only(body) and all(reading[name] for name in needed_names(blocks, body))


def _library_format(blocks: Sequence[tuple[str, str]]) -> str:
    """The format this library writes (``FORMAT`` in ``lib/base.lua``)."""
    match = re.search(r"^local FORMAT = '(\w+)'", dict(blocks)["FORMAT"], re.MULTILINE)
    if match is None:
        raise ValueError(f"{LIBRARY_FOLDER}/base.lua must define FORMAT")
    return match.group(1)


@functools.cache
def load_library() -> FunctionLibrary:
    """The Functions library of this release (with the key check when
    :data:`CHECK_KEYS_ENV` asks for it), named :func:`library_name`; cached for the process.
    Built only when a server needs it loaded: a call needs only the name."""
    folder = script_dir()
    return library_code(
        _library(folder), _bodies(folder), checking=checking_service_rules(), named=library_name()
    )


@functools.cache
def library_name() -> str:
    """``ctxstore_<format>_<hash>``: the format this release writes and a SHA1 of what makes
    the library's code (every Lua file, this loader, the key check's setting), so a process
    names its functions without building the library, and any change of its code is a new
    name (two releases' libraries never share one)."""
    folder = script_dir()
    digest = hashlib.sha1(Path(__file__).read_bytes())
    digest.update(b"checked" if checking_service_rules() else b"plain")
    for name, text in (*_library_files(folder), *_bodies(folder)):
        digest.update(f"\0{name}\0{len(text)}\0".encode() + text.encode("utf-8"))
    base = dict(_library_files(folder))[LIBRARY[0]]
    found = re.search(r"^local FORMAT = '(\w+)'", base, re.MULTILINE)
    if found is None:
        raise ValueError(f"{LIBRARY_FOLDER}/{LIBRARY[0]}.lua must define FORMAT")
    return f"ctxstore_{found.group(1)}_{digest.hexdigest()[:16]}"


@functools.cache
def _library_files(folder: Path) -> tuple[tuple[str, str], ...]:
    """The library files of ``folder`` as read (see :func:`read_library`), read once."""
    return tuple(read_library(folder / LIBRARY_FOLDER))


@functools.cache
def load_script(name: str) -> LuaScript:
    """Load ``lua/<name>.lua``'s contract and function; cached for the process."""
    folder = script_dir()
    body = dict(_bodies(folder))[name]
    key_names, arg_names, required = parse_contract(name, body)
    function = f"{library_name()}_{name}"
    read_only = declares_no_writes(body)
    return LuaScript(name, key_names, arg_names, required, function, read_only)


@functools.cache
def script_source(name: str) -> str:
    """``lua/<name>.lua`` as a script: the library definitions it uses, its call and reply
    fields, then its text (with the key check when :data:`CHECK_KEYS_ENV` asks for it)."""
    folder = script_dir()
    body = dict(_bodies(folder))[name]
    source = f"{needed_library(_library(folder), body)}\n{named_fields(name, body)}{body}"
    return with_key_check(source) if checking_service_rules() else source


def entry_script_names() -> list[str]:
    """Every entry script shipped with ctxstore: the ``.lua`` files of ``lua/`` itself (the
    library lives in ``lua/lib/``)."""
    return sorted(path.stem for path in script_dir().glob("*.lua"))
