"""The ``ctxstore`` command line: inspect chats in a store from a terminal.

``ctxstore [--url URL] [--namespace NS] COMMAND ...`` where COMMAND is ``demo``, ``chats``,
``tree``, ``log``, ``export``, ``verify`` or ``worker`` (:mod:`ctxstore.worker.command`).
Without ``--url`` the store comes from
``CTXSTORE_URL``, else the embedded ``memory://`` store (which starts empty in every process).

Mistakes are reported the same way whoever made them: a store error (a chat that does not
exist, a bad URL, an unreachable server) or a usage error prints one line,
``ctxstore: <message>``, on stderr and exits 1 (store) or 2 (usage); no traceback, since
nothing is wrong with the program.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from typing import NoReturn

import ctxstore
from ctxstore.context.visualize import (
    ROLE_CHARS,
    SHORT_ID_CHARS,
    printable,
    short_id,
    visualize_graph,
)
from ctxstore.core.preview import message_label, message_text, one_line, preview
from ctxstore.core.verify import VerifyReport
from ctxstore.errors import CtxStoreError
from ctxstore.exporting import to_dot, to_json, to_mermaid
from ctxstore.models import BranchChain, ChatGraph, ChatInfo
from ctxstore.worker.command import add_worker_command

__all__ = ["DEFAULT_CHAT_LIMIT", "build_parser", "main"]

#: How many chats ``chats`` lists unless ``--limit`` says otherwise.
DEFAULT_CHAT_LIMIT = 50
_TITLE_CHARS = 40
#: Continuation lines of a message in ``log`` start under its role, so the left column holds
#: only message ids and one glance down it shows where each message begins.
_LOG_INDENT = " " * (SHORT_ID_CHARS + 1)

_EXPORTERS: dict[str, Callable[[ChatGraph], str]] = {
    "json": to_json,
    "mermaid": to_mermaid,
    "dot": to_dot,
}

Handler = Callable[[argparse.Namespace], int]
Render = Callable[[ctxstore.Store, argparse.Namespace], str]


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


def _demo(_args: argparse.Namespace) -> int:
    from ctxstore.demo import run_demo

    run_demo(print)
    return 0


def _with_store(render: Render) -> Handler:
    """A handler that opens the store the global options name, renders, prints, closes."""

    def handler(args: argparse.Namespace) -> int:
        with ctxstore.connect(args.url, namespace=args.namespace) as store:
            text = render(store, args)
        print(text)
        return 0

    return handler


# --- chats -----------------------------------------------------------------------------------


def _chats(store: ctxstore.Store, args: argparse.Namespace) -> str:
    chats = store.list_chats(user_id=args.user, limit=args.limit)
    if not chats:
        owner = f" for user {args.user!r}" if args.user is not None else ""
        return printable(f"no chats{owner}")
    return printable(_chat_table(chats))


def _chat_table(chats: Sequence[ChatInfo]) -> str:
    """Chats as an aligned table, newest first as listed; counts right-aligned, times UTC."""
    header = ("ID", "USER", "TITLE", "MESSAGES", "BRANCHES", "UPDATED")
    rows = [header] + [
        (
            chat.id,
            chat.user_id,
            one_line(chat.title, _TITLE_CHARS) if chat.title else "-",
            str(chat.message_count),
            str(chat.branch_count),
            _iso_utc(chat.updated_at),
        )
        for chat in chats
    ]
    widths = [max(len(row[column]) for row in rows) for column in range(len(header))]
    numeric = {3, 4}
    return "\n".join(
        "  ".join(
            cell.rjust(width) if column in numeric else cell.ljust(width)
            for column, (cell, width) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in rows
    )


def _iso_utc(epoch_ms: int) -> str:
    """Epoch milliseconds as ISO-8601 UTC to the second (``2023-11-14T22:13:20Z``)."""
    moment = datetime.fromtimestamp(epoch_ms / 1000, tz=timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


# --- tree, log, export -----------------------------------------------------------------------


def _tree(store: ctxstore.Store, args: argparse.Namespace) -> str:
    return visualize_graph(store.get_graph(args.chat))


def _log(store: ctxstore.Store, args: argparse.Namespace) -> str:
    return _branch_log(store.load_branch(args.chat, args.branch))


def _branch_log(chain: BranchChain) -> str:
    """A branch's chain, root first: a header, then each message's id, role and whole text.

    A message without text (a tool call) shows its preview (``calls search``) instead of
    nothing, so every line says something about its message.
    """
    branch = chain.branch
    active = " (active)" if branch.is_active else ""
    count = len(chain.messages)
    lines = [f"branch {branch.name}{active}: {count} message{'' if count == 1 else 's'}"]
    for stored in chain.messages:
        message = stored["message"]
        text = message_text(message) or preview(message)
        first, *rest = text.splitlines() or [""]
        role = one_line(message_label(message), ROLE_CHARS)
        lines.append(f"{short_id(stored['id'])} {role}: {first}".rstrip())
        lines.extend((_LOG_INDENT + line).rstrip() for line in rest)
    return printable("\n".join(lines))


def _export(store: ctxstore.Store, args: argparse.Namespace) -> str:
    return _EXPORTERS[args.format](store.get_graph(args.chat))


# --- verify ----------------------------------------------------------------------------------


def _verify(args: argparse.Namespace) -> int:
    """Exit 0 when the chat is sound (after the repair, with ``--repair``), 1 when problems
    remain, so scripts and cron jobs can act on the code alone."""
    with ctxstore.connect(args.url, namespace=args.namespace) as store:
        report = store.verify_chat(args.chat, repair=args.repair)
    if args.json:
        print(json.dumps(report.as_dict(), indent=2, ensure_ascii=False))
    else:
        print(printable(_verify_text(report)))
    return 0 if report.ok else 1


def _verify_text(report: VerifyReport) -> str:
    """What was repaired, then ``ok: ...`` or one ``kind key field: detail`` line per problem."""
    lines = [f"repaired: {what}" for what in report.repaired]
    if report.ok:
        messages = f"{report.messages} message{'' if report.messages == 1 else 's'}"
        branches = f"{report.branches} branch{'' if report.branches == 1 else 'es'}"
        lines.append(f"ok: chat {report.chat_id}, {messages}, {branches}")
    for problem in report.problems:
        where = " ".join(part for part in (problem.kind, problem.key, problem.field) if part)
        lines.append(f"{where}: {problem.detail}")
    return "\n".join(lines)


# --- parser and entry point ------------------------------------------------------------------


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="ctxstore", description="Conversation context for AI agents, kept in Redis."
    )
    parser.add_argument(
        "--url",
        default=None,
        help="store URL (memory://, redis://, redis+cluster://, ...); "
        "default: $CTXSTORE_URL, else memory://",
    )
    parser.add_argument("--namespace", default=None, help="the tenant namespace to read")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    demo = commands.add_parser("demo", help="a scripted walkthrough on the embedded store")
    demo.set_defaults(handler=_demo)

    chats = commands.add_parser("chats", help="list chats, most recently updated first")
    chats.add_argument("--user", default=None, help="only this user's chats")
    chats.add_argument(
        "--limit",
        type=_positive_int,
        default=DEFAULT_CHAT_LIMIT,
        help=f"at most this many chats (default {DEFAULT_CHAT_LIMIT})",
    )
    chats.set_defaults(handler=_with_store(_chats))

    tree = commands.add_parser("tree", help="draw a chat's messages, branches and checkpoints")
    tree.add_argument("chat", metavar="CHAT", help="chat id")
    tree.set_defaults(handler=_with_store(_tree))

    log = commands.add_parser("log", help="print the messages of a branch, root first")
    log.add_argument("chat", metavar="CHAT", help="chat id")
    log.add_argument("--branch", default=None, help="branch name (default: the active branch)")
    log.set_defaults(handler=_with_store(_log))

    export = commands.add_parser("export", help="print a chat's graph as JSON, Mermaid or DOT")
    export.add_argument("chat", metavar="CHAT", help="chat id")
    export.add_argument("--format", choices=sorted(_EXPORTERS), default="json")
    export.set_defaults(handler=_with_store(_export))

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
    add_worker_command(commands, _positive_int)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the exit code (0, 1 for store errors, 2 for usage errors)."""
    try:
        args = build_parser().parse_args(argv)
    except _UsageError as error:
        return _fail(error, 2)
    except SystemExit as done:  # --help
        return done.code if isinstance(done.code, int) else 0
    try:
        code: int = args.handler(args)
    except CtxStoreError as error:
        return _fail(error, 1)
    return code


def _fail(error: Exception, code: int) -> int:
    print(printable(f"ctxstore: {error}"), file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
