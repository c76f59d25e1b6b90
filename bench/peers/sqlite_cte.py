"""The recursive-CTE design on SQLite (stdlib ``sqlite3``): the usual relational answer.

Messages are rows with a parent id; a ``branches`` row holds each branch's head. An append is
one transaction (INSERT the message, UPDATE the head); a load walks from the head up through
``parent_id`` with ``WITH RECURSIVE`` and returns the chain root first. The database is a file
in the run's temporary directory, in WAL mode with ``synchronous=NORMAL`` (the common setting
for an application database; ``FULL`` would add an fsync per append).
"""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

NAME = "sqlite recursive CTE"
PACKAGE = "sqlite3 (stdlib)"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS messages (
    id TEXT NOT NULL,
    chat_id TEXT NOT NULL,
    parent_id TEXT,
    data TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS messages_chat_id ON messages (chat_id, id);
CREATE TABLE IF NOT EXISTS branches (
    chat_id TEXT NOT NULL,
    name TEXT NOT NULL,
    head TEXT,
    PRIMARY KEY (chat_id, name)
);
"""

_CHAIN = """
WITH RECURSIVE chain(id, parent_id, data, depth) AS (
    SELECT m.id, m.parent_id, m.data, 0 FROM messages AS m
    WHERE m.chat_id = :chat AND m.id = (
        SELECT head FROM branches WHERE chat_id = :chat AND name = :branch
    )
    UNION ALL
    SELECT m.id, m.parent_id, m.data, chain.depth + 1 FROM messages AS m
    JOIN chain ON m.chat_id = :chat AND m.id = chain.parent_id
)
SELECT id, parent_id, data FROM chain ORDER BY depth DESC
"""


class SqlitePeer:
    name = NAME

    def __init__(self, path: Path, chat_id: str = "peer-chat", branch: str = "main") -> None:
        self._db = sqlite3.connect(path, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)
        self._chat = chat_id
        self._branch = branch
        self._db.execute(
            "INSERT OR IGNORE INTO branches (chat_id, name, head) VALUES (?, ?, NULL)",
            (chat_id, branch),
        )

    def append(self, message: dict[str, str]) -> str:
        """INSERT the message under the branch head and move the head, in one transaction."""
        message_id = uuid.uuid4().hex
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            (head,) = db.execute(
                "SELECT head FROM branches WHERE chat_id = ? AND name = ?",
                (self._chat, self._branch),
            ).fetchone()
            db.execute(
                "INSERT INTO messages (id, chat_id, parent_id, data, created_at)"
                " VALUES (?, ?, ?, ?, ?)",
                (message_id, self._chat, head, json.dumps(message), int(time.time() * 1000)),
            )
            db.execute(
                "UPDATE branches SET head = ? WHERE chat_id = ? AND name = ?",
                (message_id, self._chat, self._branch),
            )
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        return message_id

    def load(self) -> list[dict[str, Any]]:
        rows = self._db.execute(_CHAIN, {"chat": self._chat, "branch": self._branch})
        return [{"id": row[0], "parent_id": row[1], "message": json.loads(row[2])} for row in rows]

    def floors(self) -> dict[str, Callable[[], object]]:
        return {"SELECT 1": lambda: self._db.execute("SELECT 1").fetchone()}

    def close(self) -> None:
        self._db.close()


def open_peer(url: str, directory: Path) -> SqlitePeer:  # noqa: ARG001 - no server needed
    return SqlitePeer(directory / "peer.sqlite3")
