"""The ``ctxstore`` command line: inspect, export, import and delete chats from a terminal.

``ctxstore [--url URL] [--namespace NS] [--keys PATH] COMMAND ...`` where COMMAND is
``demo``, ``chats``, ``tree``, ``log``, ``branches``, ``checkpoints``, ``export``,
``import``, ``delete``, ``verify``, ``erase-user``, ``export-user``, ``sweep``, ``migrate``
and ``rotate-keys`` (:mod:`ctxstore.cli.lifecycle`),
``worker`` (:mod:`ctxstore.worker.command`), ``local`` (the server of a ``local://`` store,
:mod:`ctxstore.cli.local`) or ``web`` (the read-only web console, :mod:`ctxstore.cli.web`);
``ctxstore --version`` prints the version, and ``python -m ctxstore`` is the same program.
Without ``--url`` the store comes from ``CTXSTORE_URL``; with neither, the command refuses
(exit 1) rather than open a store nobody else sees. ``--url memory://`` (a private embedded
store, empty in every process) is taken when asked for, with a one-line note on stderr that
says where that data lives. Every command but ``demo`` acts as an operator: on the store's
``admin()`` handle.

Mistakes are reported the same way whoever made them: a store error (a chat that does not
exist, a bad URL, an unreachable server), a file that cannot be read or a usage error prints one
line, ``ctxstore: <message>``, on stderr and exits 1 (store, file) or 2 (usage); no traceback,
since nothing is wrong with the program. A reader that closes the pipe early
(``ctxstore log c1 | head -1``) ends the command quietly with exit code 141 (see
:mod:`ctxstore.cli.terminal`). Colour goes only to a terminal, and never with ``NO_COLOR`` set.

``delete`` asks for confirmation on the terminal; ``--yes`` skips the question, and without a
terminal to ask on (a script, a pipe) it refuses unless ``--yes`` is given: deleting is for
good, so a script must say so.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NoReturn

import ctxstore
from ctxstore._core.format.portable import dumps_line
from ctxstore.cli import views
from ctxstore.cli.diagrams import to_dot, to_json, to_mermaid
from ctxstore.cli.files import FileProblemError, opened_lines, write_text
from ctxstore.cli.functions import add_functions_command
from ctxstore.cli.lifecycle import ConfirmationRefusedError, add_lifecycle_commands
from ctxstore.cli.local import add_local_command
from ctxstore.cli.terminal import BROKEN_PIPE_EXIT, Style, confirm, silence_stdout
from ctxstore.cli.tree import printable, visualize_graph
from ctxstore.cli.web import add_web_command
from ctxstore.errors import ChatNotFoundError, ConfigurationError, CtxStoreError
from ctxstore.models import ChatGraph
from ctxstore.worker.command import KEYS_ENV, URL_ENV, add_worker_command, key_provider

__all__ = ["DEFAULT_CHAT_LIMIT", "build_parser", "main"]

#: How many chats ``chats`` lists unless ``--limit`` says otherwise.
DEFAULT_CHAT_LIMIT = 50
#: Printed on stderr when the CLI opens an embedded store, which starts empty in each process.
MEMORY_NOTE = (
    "ctxstore: note: memory:// is in this process, gone when it exits: a new, empty store where "
    f"nothing written by another process will be found; pass --url redis://HOST:6379 or "
    f"local://PATH, or set {URL_ENV}, for a store that lasts"
)

#: The drawing formats: previews of the graph (``get_graph``), not its content.
_DRAWINGS: dict[str, Callable[[ChatGraph], str]] = {
    "json": to_json,
    "mermaid": to_mermaid,
    "dot": to_dot,
}
_FORMATS = ("jsonl", *sorted(_DRAWINGS))

Handler = Callable[[argparse.Namespace], int]


class _UsageError(Exception):
    """The command line is malformed (raised by the parser instead of exiting)."""


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors raise :class:`_UsageError`.

    argparse's own ``error`` prints the whole usage text and exits from deep inside
    ``parse_args``; raising lets :func:`main` report every mistake as one line and return its
    exit code, which also keeps ``main`` callable from tests and other programs.
    Subcommand parsers are made with the same class, so their errors raise too.
    """

    def error(self, message: str) -> NoReturn:
        raise _UsageError(f"{message} (see '{self.prog} --help')")


def _open_store(args: argparse.Namespace) -> ctxstore.AdminStore:
    """The store the global options name (``--url``, else ``CTXSTORE_URL``, else a
    ConfigurationError naming both), as an operator's handle: the commands inspect, export,
    import, delete and verify any user's chats. A note on stderr when that is a new, empty
    embedded store."""
    url = args.url if args.url is not None else os.environ.get(URL_ENV)
    if url is not None and url.lower().rstrip("/") == "memory:":
        # A private embedded store: new and empty in every process. (A named one,
        # memory://NAME, is shared within a process that embeds the command line.)
        print(_stderr_style().paint(MEMORY_NOTE, "yellow"), file=sys.stderr)
    return ctxstore.connect(url, namespace=args.namespace, encryption=key_provider(args)).admin()


def _out(text: str) -> None:
    print(text)


def _style() -> Style:
    return Style.for_stream(sys.stdout)


def _stderr_style() -> Style:
    return Style.for_stream(sys.stderr)


# --- demo, chats -----------------------------------------------------------------------------


def _demo(args: argparse.Namespace) -> int:
    """On the embedded store, unless ``--url`` names another (``CTXSTORE_URL`` is not read:
    the demo must run anywhere, whatever a deployment's environment says)."""
    from ctxstore.cli.demo import run_demo

    run_demo(print, args.url or "memory://")
    return 0


def _chats(args: argparse.Namespace) -> int:
    pairs = args.metadata or []
    if len(pairs) > 1:
        raise _UsageError("chats: --metadata is given once (the store filters on one key)")
    with _open_store(args) as store:
        chats = store.list_chats(
            user_id=args.user,
            metadata=pairs[0] if pairs else None,
            limit=args.limit,
            offset=args.offset,
        )
    if args.json:
        _out(views.chats_json(chats))
    elif not chats:
        owner = f" for user {args.user!r}" if args.user is not None else ""
        _out(printable(f"no chats{owner}"))
    else:
        _out(views.chat_table(chats, _style()))
    return 0


def _metadata_pair(text: str) -> tuple[str, str]:
    key, separator, value = text.partition("=")
    if not separator or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


# --- tree, log, branches, checkpoints --------------------------------------------------------


def _tree(args: argparse.Namespace) -> int:
    with _open_store(args) as store:
        graph = store.get_graph(args.chat)
    cut, left_out = views.cut_graph(graph, args.branch, args.limit)
    style = _style()
    text = visualize_graph(cut, _tree_paint(style))
    if left_out:
        noun = "message" if left_out == 1 else "messages"
        text += "\n" + style.paint(f"({left_out} {noun} not shown)", "dim")
    _out(text)
    return 0


def _tree_paint(style: Style) -> Callable[[str, str], str]:
    colours = {"id": "yellow", "role": "cyan", "heads": "green", "checkpoints": "dim"}
    return lambda kind, text: style.paint(text, colours[kind])


def _log(args: argparse.Namespace) -> int:
    with _open_store(args) as store:
        if args.limit is None:
            chain = store.load_branch(args.chat, args.branch)
            branch, messages = chain.branch, chain.messages
        else:
            branch = store.get_branch(args.chat, args.branch)
            messages = store.get_chain(
                args.chat, branch.head_message_id, max_depth=args.limit, newest=True
            )
    _out(views.branch_log(branch, messages, _style(), limited=args.limit is not None))
    return 0


def _branches(args: argparse.Namespace) -> int:
    with _open_store(args) as store:
        branches = store.list_branches(args.chat)
    _out(views.branch_table(branches, _style()))
    return 0


def _checkpoints(args: argparse.Namespace) -> int:
    with _open_store(args) as store:
        checkpoints = store.list_checkpoints(args.chat)
    _out(views.checkpoint_table(args.chat, checkpoints, _style()))
    return 0


# --- export, import, delete ------------------------------------------------------------------


def _export(args: argparse.Namespace) -> int:
    if args.sealed and args.format != "jsonl":
        raise ConfigurationError("--sealed is for --format jsonl (a graph is a view, not a backup)")
    with _open_store(args) as store:
        if args.format == "jsonl":
            records = store.export_chat(args.chat, sealed=args.sealed)
            write_text(args.output, (dumps_line(record) for record in records))
        else:
            text = _DRAWINGS[args.format](store.get_graph(args.chat))
            write_text(args.output, [text + "\n"])
    return 0


def _import(args: argparse.Namespace) -> int:
    counts: dict[str, int] = {}

    def counted(records: Iterator[Any]) -> Iterator[Any]:
        for record in records:
            kind = record.get("type")
            if isinstance(kind, str):
                counts[kind] = counts.get(kind, 0) + 1
            yield record

    with _open_store(args) as store, opened_lines(args.file) as records:
        meta = store.import_chat(counted(records), chat_id=args.chat_id, user_id=args.user)
    parts = [
        views.summary_line(kind, counts.get(kind, 0))
        for kind in ("message", "branch", "checkpoint", "summary")
    ]
    _out(printable(f"imported chat {meta.id} of {meta.user_id}: {', '.join(parts)}"))
    return 0


def _delete(args: argparse.Namespace) -> int:
    if not args.yes and not _interactive():
        raise _UsageError(
            f"delete: not deleting chat {args.chat!r} without --yes (there is no terminal to "
            "confirm on)"
        )
    with _open_store(args) as store:
        if not args.yes:
            chat = store.get_chat(args.chat)
            title = f" ({chat.title})" if chat.title else ""
            question = printable(
                f"delete chat {chat.id}{title} of {chat.user_id}, last updated "
                f"{views.iso_utc(chat.updated_at)}, for good?"
            )
            if not confirm(question, sys.stdin, sys.stderr):
                print("ctxstore: nothing deleted", file=sys.stderr)
                return 1
        if not store.delete_chat(args.chat):
            raise ChatNotFoundError(f"chat {args.chat!r} does not exist", chat_id=args.chat)
    _out(printable(f"deleted chat {args.chat}"))
    return 0


def _interactive() -> bool:
    try:
        return sys.stdin is not None and sys.stdin.isatty()
    except (AttributeError, ValueError):
        return False


# --- verify ----------------------------------------------------------------------------------


def _verify(args: argparse.Namespace) -> int:
    """Exit 0 when the chat is sound (after the repair, with ``--repair``), 1 when problems
    remain, so scripts and cron jobs can act on the code alone."""
    with _open_store(args) as store:
        report = store.verify_chat(args.chat, repair=args.repair)
    if args.json:
        _out(views.as_json(report.as_dict()))
    else:
        _out(views.verify_text(report, _style()))
    return 0 if report.ok else 1


# --- parser and entry point ------------------------------------------------------------------


def _positive_int(text: str) -> int:
    value = _whole_number(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _non_negative_int(text: str) -> int:
    value = _whole_number(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be at least 0, got {value}")
    return value


def _whole_number(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="ctxstore", description="Conversation context for AI agents, kept in Redis."
    )
    parser.add_argument("--version", action="version", version=f"ctxstore {ctxstore.__version__}")
    parser.add_argument(
        "--url",
        default=None,
        help="store URL (memory://, local://PATH, redis://, redis+cluster://, ...); "
        f"default: ${URL_ENV}; memory:// is an empty store in this process",
    )
    parser.add_argument("--namespace", default=None, help="the tenant namespace to read")
    parser.add_argument(
        "--keys",
        default=None,
        metavar="PATH",
        help="the key directory of a LocalKeyProvider, for a store with encryption "
        f"(default: ${KEYS_ENV}); see docs/encryption.md",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    demo = commands.add_parser(
        "demo", help="a scripted walkthrough on the embedded store (or on --url's store)"
    )
    demo.set_defaults(handler=_demo)

    chats = commands.add_parser("chats", help="list chats, most recently updated first")
    chats.add_argument("--user", default=None, help="only this user's chats")
    chats.add_argument(
        "--metadata",
        type=_metadata_pair,
        action="append",
        default=None,
        metavar="KEY=VALUE",
        help="only chats whose metadata KEY holds the string VALUE (given once: the store "
        "filters on one key)",
    )
    chats.add_argument(
        "--limit",
        type=_positive_int,
        default=DEFAULT_CHAT_LIMIT,
        help=f"at most this many chats (default {DEFAULT_CHAT_LIMIT})",
    )
    chats.add_argument(
        "--offset", type=_non_negative_int, default=0, help="skip this many chats first"
    )
    chats.add_argument("--json", action="store_true", help="print the chats as a JSON array")
    chats.set_defaults(handler=_chats)

    tree = commands.add_parser("tree", help="draw a chat's messages, branches and checkpoints")
    tree.add_argument("chat", metavar="CHAT", help="chat id")
    tree.add_argument("--branch", default=None, help="only the messages of this branch")
    tree.add_argument(
        "--limit", type=_positive_int, default=None, help="only the newest N messages"
    )
    tree.set_defaults(handler=_tree)

    log = commands.add_parser("log", help="print the messages of a branch, root first")
    log.add_argument("chat", metavar="CHAT", help="chat id")
    log.add_argument("--branch", default=None, help="branch name (default: the active branch)")
    log.add_argument("--limit", type=_positive_int, default=None, help="only the newest N messages")
    log.set_defaults(handler=_log)

    branches = commands.add_parser("branches", help="list a chat's branches, oldest first")
    branches.add_argument("chat", metavar="CHAT", help="chat id")
    branches.set_defaults(handler=_branches)

    checkpoints = commands.add_parser("checkpoints", help="list a chat's checkpoints, newest first")
    checkpoints.add_argument("chat", metavar="CHAT", help="chat id")
    checkpoints.set_defaults(handler=_checkpoints)

    _add_transfer(commands)

    delete = commands.add_parser("delete", help="delete a chat for good")
    delete.add_argument("chat", metavar="CHAT", help="chat id")
    delete.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    delete.set_defaults(handler=_delete)

    _add_verify(commands)
    add_lifecycle_commands(commands, _open_store, _interactive)
    add_functions_command(commands, _open_store)
    add_worker_command(commands, _positive_int)
    add_local_command(commands)
    add_web_command(commands)
    return parser


def _add_transfer(commands: Any) -> None:
    """``export`` and ``import``."""
    export = commands.add_parser(
        "export", help="write a whole chat as JSON Lines, or its graph as JSON, Mermaid or DOT"
    )
    export.add_argument("chat", metavar="CHAT", help="chat id")
    export.add_argument(
        "--format",
        choices=_FORMATS,
        default="json",
        help="jsonl: everything, for import; json, mermaid, dot: the graph with one-line "
        "previews (default json)",
    )
    export.add_argument(
        "-o", "--output", default=None, metavar="FILE", help="write to FILE (default: stdout)"
    )
    export.add_argument(
        "--sealed",
        action="store_true",
        help="with --format jsonl and --keys: the text sealed under the owner's data key (a "
        "backup that never opens once the user is erased)",
    )
    export.set_defaults(handler=_export)

    imported = commands.add_parser("import", help="create a chat from a JSON Lines export")
    imported.add_argument("file", metavar="FILE", help="the export (- for stdin)")
    imported.add_argument("--chat-id", default=None, help="import under this id instead")
    imported.add_argument("--user", default=None, help="the owner instead of the exported one")
    imported.set_defaults(handler=_import)


def _add_verify(commands: Any) -> None:
    verify = commands.add_parser(
        "verify", help="check a chat's invariants; --repair rebuilds its derived keys"
    )
    verify.add_argument("chat", metavar="CHAT", help="chat id")
    verify.add_argument(
        "--repair",
        action="store_true",
        help="rebuild the indexes and counters the message records determine, then check again",
    )
    verify.add_argument("--json", action="store_true", help="print the report as JSON")
    verify.set_defaults(handler=_verify)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the exit code (0, 1 for store and file errors, 2 for usage
    errors, 141 when the reader of stdout went away)."""
    try:
        try:
            args = build_parser().parse_args(argv)
        except SystemExit as done:  # --help, --version
            sys.stdout.flush()
            return done.code if isinstance(done.code, int) else 0
        code: int = args.handler(args)
        sys.stdout.flush()
        return code
    except (_UsageError, ConfirmationRefusedError) as error:
        return _fail(error, 2)
    except (CtxStoreError, FileProblemError) as error:
        return _fail(error, 1)
    except BrokenPipeError:
        silence_stdout()
        return BROKEN_PIPE_EXIT


def _fail(error: Exception, code: int) -> int:
    prefix = _stderr_style().paint("ctxstore:", "red")
    print(f"{prefix} {printable(str(error))}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
