"""The peers' own classes, standing in as ctxstore's: what the swapped suites import.

``SQLiteSession(session_id, db_path=":memory:", ...)`` is a :class:`CtxStoreSession` under the
SDK's name (so its messages, "SQLiteSession is closed", read as the SDK's): one store per
database, as SQLite has one file per path. ``PEER_URL`` names the backend: ``memory://`` (a
named embedded store per path, private for ``":memory:"``) or a Redis URL (a namespace per
path).
"""

from __future__ import annotations

import hashlib
import os
import uuid
from pathlib import Path
from typing import Any

import ctxstore
from ctxstore.integrations.openai_agents import CtxStoreSession

#: The owner of every chat the suites write.
PEER_USER = "peer"


def _store_for(db_path: str | Path) -> ctxstore.Store:
    base = os.environ.get("PEER_URL", "memory://")
    private = str(db_path) == ":memory:"
    name = uuid.uuid4().hex if private else hashlib.sha1(str(db_path).encode()).hexdigest()
    if base.startswith("memory://"):
        return ctxstore.connect(f"memory://peer-{name}")
    return ctxstore.connect(base, namespace=f"peer-{name[:16]}")


class SQLiteSession(CtxStoreSession):
    """The OpenAI Agents SDK's ``SQLiteSession`` signature over a ctxstore chat."""

    def __init__(
        self,
        session_id: str,
        db_path: str | Path = ":memory:",
        create_tables: bool = False,  # noqa: ARG002 - the SDK's signature; nothing to create
        *,
        logger: Any = None,  # noqa: ARG002 - the SDK's signature; ctxstore logs as "ctxstore"
        session_settings: Any = None,
    ) -> None:
        super().__init__(
            session_id,
            user_id=PEER_USER,
            store=_store_for(db_path),
            session_settings=session_settings,
        )
        self._owns_store = True
