"""``ctxstore web``: the read-only web console (:mod:`ctxstore.web`), served by uvicorn.

``ctxstore web --url URL [--namespace NS ...] [--host 127.0.0.1] [--port 8377] [--token T]
[--keys PATH]``. With ``--keys`` (or the global ``--keys``, or ``CTXSTORE_KEYS``) it opens sealed
chats; without, a sealed chat shows its graph and counts, not its text.
Bound to 127.0.0.1 by default; any other address needs a token (``--token`` or
``CTXSTORE_WEB_TOKEN``), else the command refuses to start (exit 1) before it opens anything.
Starlette, Jinja2 and uvicorn come from the extra ``ctxstore[web]``, imported only here.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from ctxstore.errors import ConfigurationError
from ctxstore.worker.command import URL_ENV, key_provider

#: The port the console listens on unless told otherwise.
DEFAULT_PORT = 8377


def add_web_command(commands: Any) -> None:
    """The ``web`` subcommand on the CLI's subparsers."""
    web = commands.add_parser("web", help="serve the read-only web console (ctxstore[web])")
    web.add_argument("--url", dest="web_url", default=None, help="store URL (default: --url)")
    web.add_argument(
        "--namespace", dest="web_namespaces", action="append", default=None, metavar="NS",
        help="a namespace to show (repeat for more; default: --namespace)",
    )  # fmt: skip
    web.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    web.add_argument("--port", type=int, default=DEFAULT_PORT, help="port (default 8377)")
    web.add_argument(
        "--token", default=None,
        help="the token every request must carry (default: $CTXSTORE_WEB_TOKEN); required "
        "to bind anything but a loopback address",
    )  # fmt: skip
    web.add_argument(
        "--keys", dest="web_keys", default=None, metavar="PATH",
        help="the key directory of a LocalKeyProvider (default: --keys, $CTXSTORE_KEYS): "
        "sealed chats show their text; without it they show their graph and counts only",
    )  # fmt: skip
    web.set_defaults(handler=_serve)


def _serve(args: argparse.Namespace) -> int:
    from ctxstore.web.access import TOKEN_ENV, check_bind

    token = args.token if args.token is not None else os.environ.get(TOKEN_ENV) or None
    check_bind(args.host, token)
    try:
        import uvicorn

        from ctxstore.web import app
    except ImportError as error:
        raise ConfigurationError(
            f"the web console needs its extra: pip install 'ctxstore[web]' ({error})"
        ) from None
    url = args.web_url or args.url or os.environ.get(URL_ENV)
    if url is None:
        raise ConfigurationError(
            f"ctxstore web needs a store: pass --url redis://HOST:6379 (or local://PATH) or set "
            f"{URL_ENV}"
        )
    if url.lower().startswith("memory:"):
        print(
            "ctxstore: note: the console shows memory://, a new, empty store in this process, "
            "gone when it exits",
            file=sys.stderr,
        )
    namespaces = args.web_namespaces or ([args.namespace] if args.namespace else None)
    args.keys = args.web_keys or getattr(args, "keys", None)
    console = app(url, namespaces=namespaces, token=token, encryption=key_provider(args))
    print(f"ctxstore web console on http://{args.host}:{args.port}/", file=sys.stderr)
    uvicorn.run(console, host=args.host, port=args.port, log_level="warning")
    return 0
