"""The ``ctxstore`` command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ctxstore.errors import CtxStoreError


def _demo(_args: argparse.Namespace) -> int:
    from ctxstore.demo import run_demo

    run_demo(print)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ctxstore", description="Conversation context for AI agents, kept in Redis."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="a scripted walkthrough on the embedded store")
    demo.set_defaults(handler=_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code: int = args.handler(args)
    except CtxStoreError as error:
        print(f"ctxstore: {error}", file=sys.stderr)
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main())
