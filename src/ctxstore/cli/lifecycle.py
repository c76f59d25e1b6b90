"""``ctxstore erase-user``, ``export-user`` and ``sweep``: a user's data, all of it, on
request, and the upkeep that keeps the indexes from growing.

``erase-user USER`` erases every chat the user owns in the namespace and everything derived
from them (:meth:`~ctxstore.store.Store.erase_user`), asking for confirmation on a terminal
(``--yes`` skips the question; without a terminal it refuses unless ``--yes`` is given, as
``delete`` does), with its progress on stderr when that is a terminal. It prints the receipt:
what it removed, by kind, and what it cannot reach (``--json``: the receipt as JSON). Run
again after an interruption, it finishes the job.

``export-user USER [-o FILE]`` writes every chat of the user as JSON Lines, one chat's export
after another (each can be imported with ``ctxstore import``).

``sweep [--grace-ms MS] [--json]`` runs one pass of the sweep the worker runs in the background
(:meth:`~ctxstore.store.Store.sweep`): the listing-index and owner-record entries of chats that
are gone are removed, and the counts printed.

``migrate [--dry-run] [--pause-ms MS] [--encrypt] [--json]`` marks the keyspace with this
release's storage format and brings every chat to it (:meth:`~ctxstore.store.Store.migrate`),
with a progress bar on stderr when that is a terminal (chats done, rate, what remains);
``--dry-run`` counts the chats by format and changes nothing; ``--encrypt`` (with ``--keys``)
seals every chat written without encryption. It exits 1 when a chat could not be migrated
(each is listed with its error).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable
from typing import IO, Any

from ctxstore._core.format.portable import dumps_line
from ctxstore._core.ops.sweep import DEFAULT_GRACE_MS
from ctxstore.cli import views
from ctxstore.cli.files import write_text
from ctxstore.cli.terminal import confirm
from ctxstore.cli.tree import printable
from ctxstore.errors import ConfigurationError
from ctxstore.models import ErasureProgress, ErasureReceipt, MigrationProgress, MigrationReport
from ctxstore.store.sync_store import AdminStore
from ctxstore.worker.command import key_provider

Opener = Callable[[argparse.Namespace], AdminStore]


class ConfirmationRefusedError(Exception):
    """``erase-user`` without ``--yes`` and without a terminal to ask on."""


def add_lifecycle_commands(
    commands: Any, open_store: Opener, interactive: Callable[[], bool]
) -> None:
    """The ``erase-user`` and ``export-user`` subcommands on the CLI's subparsers."""
    erase = commands.add_parser(
        "erase-user", help="erase every chat of a user and everything derived from them"
    )
    erase.add_argument("user", metavar="USER", help="user id")
    erase.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    erase.add_argument("--json", action="store_true", help="print the receipt as JSON")
    erase.set_defaults(handler=lambda args: _erase(args, open_store, interactive))

    export = commands.add_parser(
        "export-user", help="write every chat of a user as JSON Lines, one after another"
    )
    export.add_argument("user", metavar="USER", help="user id")
    export.add_argument(
        "-o", "--output", default=None, metavar="FILE", help="write to FILE (default: stdout)"
    )
    export.set_defaults(handler=lambda args: _export(args, open_store))

    sweep = commands.add_parser(
        "sweep", help="remove the index and owner-record entries of chats that are gone"
    )
    sweep.add_argument(
        "--grace-ms",
        type=int,
        default=DEFAULT_GRACE_MS,
        help="leave owner-record entries younger than this (a chat being created; default "
        "10 minutes)",
    )
    sweep.add_argument("--json", action="store_true", help="print the counts as JSON")
    sweep.set_defaults(handler=lambda args: _sweep(args, open_store))

    migrate = commands.add_parser(
        "migrate", help="bring the keyspace and every chat to this release's storage format"
    )
    migrate.add_argument(
        "--dry-run", action="store_true", help="count the chats by format; change nothing"
    )
    migrate.add_argument(
        "--pause-ms", type=int, default=0, help="wait this long between batches (default 0)"
    )
    migrate.add_argument(
        "--encrypt",
        action="store_true",
        help="seal every chat written without encryption (needs --keys or CTXSTORE_KEYS)",
    )
    migrate.add_argument("--json", action="store_true", help="print the report as JSON")
    migrate.set_defaults(handler=lambda args: _migrate(args, open_store))

    rotate = commands.add_parser(
        "rotate-keys",
        help="add a key-encryption key to --keys's directory and wrap every data key under it "
        "(no record changes)",
    )
    rotate.add_argument("--json", action="store_true", help="print the counts as JSON")
    rotate.set_defaults(handler=lambda args: _rotate(args, open_store))


def _erase(args: argparse.Namespace, open_store: Opener, interactive: Callable[[], bool]) -> int:
    if not args.yes and not interactive():
        raise ConfirmationRefusedError(
            f"erase-user: not erasing user {args.user!r} without --yes (there is no terminal to "
            "confirm on)"
        )
    with open_store(args) as store:
        if not args.yes:
            question = printable(
                f"erase every chat of user {args.user} and everything derived from them, for good?"
            )
            if not confirm(question, sys.stdin, sys.stderr):
                print("ctxstore: nothing erased", file=sys.stderr)
                return 1
        shown = _progress_line(sys.stderr) if _is_terminal(sys.stderr) else None
        receipt = store.erase_user(args.user, progress=shown)
        if shown is not None:
            sys.stderr.write("\n")
    if args.json:
        print(views.as_json(receipt.as_dict()))
    else:
        print(receipt_text(receipt))
    return 0


def _export(args: argparse.Namespace, open_store: Opener) -> int:
    with open_store(args) as store:
        write_text(args.output, (dumps_line(record) for record in store.export_user(args.user)))
    return 0


def _sweep(args: argparse.Namespace, open_store: Opener) -> int:
    with open_store(args) as store:
        report = store.sweep(grace_ms=args.grace_ms)
    if args.json:
        print(views.as_json(report.as_dict()))
        return 0
    print(
        f"swept: {report.index_entries_removed} of {report.index_entries_checked} index entries "
        f"and {report.record_entries_removed} of {report.record_entries_checked} owner-record "
        f"entries removed ({report.keys_walked} keys walked)"
    )
    if report.skipped:
        print(printable(f"not swept: {report.skipped}"))
    return 0


def _migrate(args: argparse.Namespace, open_store: Opener) -> int:
    with open_store(args) as store:
        shown = _progress_bar(sys.stderr) if _is_terminal(sys.stderr) else None
        report = store.migrate(
            dry_run=args.dry_run,
            pause=max(0, args.pause_ms) / 1000,
            progress=shown,
            encrypt=args.encrypt,
        )
        if shown is not None:
            sys.stderr.write("\n")
    if args.json:
        print(views.as_json(report.as_dict()))
    else:
        print(migration_text(report))
    return 1 if report.failed else 0


def _rotate(args: argparse.Namespace, open_store: Opener) -> int:
    """A new current key-encryption key in the ``--keys`` directory, then every data key of
    the namespace wrapped under it (the store opened after the key was added reads it)."""
    provider = key_provider(args)
    if provider is None:
        raise ConfigurationError("rotate-keys needs --keys PATH (or CTXSTORE_KEYS)")
    provider.add_key()
    with open_store(args) as store:
        rotation = store.rotate_keys()
    if args.json:
        print(views.as_json(dataclasses.asdict(rotation)))
    else:
        print(
            f"rotated: {views.summary_line('data key', rotation.data_keys)} of "
            f"{views.summary_line('user', rotation.users)} wrapped under {rotation.key_id}; "
            "no record changed"
        )
    return 0


def migration_text(report: MigrationReport) -> str:
    """The report for a terminal: the chats by format, what was done, what failed and why."""
    formats = ", ".join(
        f"format {name}: {count}" for name, count in sorted(report.by_format.items())
    )
    if report.dry_run:
        head = f"dry run: {views.summary_line('chat', report.chats)} ({formats or 'none'})"
        head += f"; the keyspace is format {report.previous_format}; nothing changed"
    else:
        marked = f"marked format {report.format}" if report.marked else "already marked"
        head = (
            f"migrated to format {report.format} ({marked}): "
            f"{views.summary_line('chat', report.chats)} ({formats or 'none'}), "
            f"{report.upgraded} upgraded, "
            + (f"{report.sealed} sealed, " if report.encrypt else "")
            + f"{len(report.failed)} failed "
            f"(in {report.elapsed_ms} ms{', resumed' if report.resumed else ''})"
        )
    lines = [printable(head)]
    lines += [printable(f"  {failure.chat_id}: {failure.error}") for failure in report.failed]
    return "\n".join(lines)


def _progress_bar(stream: IO[str]) -> Callable[[MigrationProgress], None]:
    """Overwrites one line of ``stream`` with a bar: chats done, rate and what remains."""

    def show(progress: MigrationProgress) -> None:
        stream.write(f"\r{progress_bar_text(progress)}\x1b[K")
        stream.flush()

    return show


def progress_bar_text(progress: MigrationProgress, width: int = 24) -> str:
    """``[#####.....] 1200 of 5000 chats, 840/s, 5 s left, 0 failed``."""
    total = progress.total
    if total:
        filled = min(width, width * progress.done // total)
        bar = "[" + "#" * filled + "." * (width - filled) + "] "
        count = f"{progress.done} of {total} chats"
    else:
        bar, count = "", f"{progress.done} chats"
    remaining = progress.remaining
    left = f", {remaining:.0f} s left" if remaining is not None else ""
    return f"migrating: {bar}{count}, {progress.rate:.0f}/s{left}, {progress.failed} failed"


def _is_terminal(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _progress_line(stream: IO[str]) -> Callable[[ErasureProgress], None]:
    """Overwrites one line of ``stream`` with the erasure's stage and count."""

    def show(progress: ErasureProgress) -> None:
        of = f" of {progress.total}" if progress.total is not None else ""
        stream.write(f"\rerasing: {progress.stage}, {progress.done}{of}\x1b[K")
        stream.flush()

    return show


def receipt_text(receipt: ErasureReceipt) -> str:
    """The receipt for a terminal: the chats, what was removed by kind, what stays out of
    reach."""
    chats = len(receipt.chat_ids)
    lines = [
        printable(
            f"erased user {receipt.user_id}: {views.summary_line('chat', chats)}, "
            f"{receipt.total} keys and entries removed "
            f"(in {max(0, receipt.finished_at - receipt.started_at)} ms)"
        )
    ]
    lines += [f"  {kind}: {count}" for kind, count in receipt.removed.items()]
    lines.append("not reachable from here:")
    lines += [printable(f"  - {place}") for place in receipt.unreachable]
    return "\n".join(lines)
