"""The web console (``ctxstore[web]``): ``ctxstore web``, or ``ctxstore.web.app(...)`` mounted
in an ASGI app.

Read-only pages for operators: the chats of each namespace served, a chat's graph (a window
drawn as SVG around a chosen message), a message, the context window the next resolve would
send, the summaries, an answer streaming now, the compaction workers, and a chat's export.
Safe to point at production: it never writes, serves only the namespaces it was started with,
escapes everything it shows, and asks for a token whenever it is reachable from another machine.

- :mod:`ctxstore.web.access`: the bind rule and the token gate (plain ASGI middleware);
- :mod:`ctxstore.web.tenants`: the namespaces served, one store each, nothing else;
- :mod:`ctxstore.web.reading`, :mod:`~ctxstore.web.context`, :mod:`~ctxstore.web.workers`,
  :mod:`~ctxstore.web.live`: what each page reads; :mod:`ctxstore.web.svg`: the graph;
- :mod:`ctxstore.web.application`: the Starlette app and its pages.

``import ctxstore`` never imports this package, and importing it imports no web framework:
:func:`app` loads Starlette and Jinja2 when called.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ctxstore.crypto.provider import KeyProvider
    from ctxstore.store.async_store import AsyncStore
    from ctxstore.store.sync_store import Store

__all__ = ["app"]


def app(
    store_or_url: Store | AsyncStore | str | None = None,
    *,
    namespaces: Sequence[str | None] | None = None,
    token: str | None = None,
    encryption: KeyProvider | None = None,
) -> Any:
    """The console as an ASGI app, to serve with any ASGI server or mount in your own app.

    ``store_or_url``: a ``Store``, an ``AsyncStore`` or a URL (None: ``CTXSTORE_URL``, and
    neither is a ConfigurationError); the console reads every user's chats, through the store's
    ``admin()`` handle (a user's handle is refused);
    ``namespaces``: the namespaces it shows (default: the store's own); ``token``: when given,
    every request must carry it (a bearer header, or the cookie its login form sets);
    ``encryption``: the key provider a URL's store opens sealed chats with (without one, a
    sealed chat shows its graph and counts, not its text; a store passed in brings its own).
    """
    try:
        from ctxstore.web.application import build_app
    except ImportError as error:  # pragma: no cover - exercised without the extra
        raise ImportError(
            "the web console needs Starlette and Jinja2: pip install 'ctxstore[web]'"
        ) from error
    return build_app(store_or_url, namespaces=namespaces, token=token, encryption=encryption)
