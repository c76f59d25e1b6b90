"""Where a LangGraph thread lives: six keys under one hash tag, in the store's namespace.

    <base>:lg:{<thread>}:cp      HASH  "<ns>\\x1f<checkpoint id>" -> checkpoint record
    <base>:lg:{<thread>}:order   ZSET  "<ns>\\x1f<checkpoint id>" (score 0: lexical order)
    <base>:lg:{<thread>}:ids     ZSET  "<checkpoint id>\\x1f<ns>" (every namespace, by id)
    <base>:lg:{<thread>}:blob    HASH  "<ns>\\x1f<channel>\\x1f<version>" -> channel value
    <base>:lg:{<thread>}:writes  ZSET  "<ns>\\x1f<id>\\x1f<task path>\\x1f<task id>\\x1f<index>
                                       \\x1f<channel>" (writes_sort_key order)
    <base>:lg:{<thread>}:values  HASH  write member -> its value
    <base>:lg:threads            ZSET  thread id -> last write (epoch ms): ``list(None)``
    <base>:lg:run:{<run id>}     ZSET  thread id -> last write: ``delete_for_runs``

Checkpoint ids are uuid6 (time-ordered text), so lexical order is time order. A thread's keys
share one slot, so every script declares them and runs on one node of a Cluster; the thread
index is written beside the script (another slot). A thread id is checked as chat ids are (no
way out of its hash tag), and a namespace, checkpoint id, channel, version or task id holding
one of the separators (``\\x1d`` to ``\\x1f``) is refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ctxstore._base.ids import check_key_id
from ctxstore.errors import ValidationError

#: Between the parts of a member or a field name.
US = "\x1f"
#: Between the parts of a checkpoint record's header.
RS = "\x1e"
#: Between a record's channel versions.
GS = "\x1d"
#: The names the scripts give the thread's keys, and their suffixes.
KEY_NAMES = {
    "lg_cp": "cp",
    "lg_order": "order",
    "lg_ids": "ids",
    "lg_blob": "blob",
    "lg_writes": "writes",
    "lg_values": "values",
}

_SEPARATORS = re.compile("[\x1d-\x1f]")


@dataclass(frozen=True)
class ThreadKeys:
    """The keys of one thread (see the module)."""

    base: str
    thread_id: str

    def key(self, name: str) -> str:
        return f"{self.base}:lg:{{{self.thread_id}}}:{KEY_NAMES[name]}"

    def select(self, names: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(self.key(name) for name in names)

    @property
    def all(self) -> tuple[str, ...]:
        return self.select(tuple(KEY_NAMES))


def thread_keys(base: str, thread_id: object) -> ThreadKeys:
    """The keys of ``thread_id`` (checked: a thread id is a key id, as a chat id is)."""
    return ThreadKeys(base, check_key_id(thread_id, "thread_id"))


def threads_index(base: str) -> str:
    """The namespace's index of threads (what ``list(None)`` walks)."""
    return f"{base}:lg:threads"


def run_index(base: str, run_id: str) -> str:
    """The threads a run wrote checkpoints to (what ``delete_for_runs`` reads)."""
    return f"{base}:lg:run:{{{run_id}}}"


def part(value: object, what: str) -> str:
    """``value`` as one part of a member: text without the separators."""
    text = value if isinstance(value, str) else str(value) if isinstance(value, int) else None
    if text is None or _SEPARATORS.search(text):
        raise ValidationError(
            f"{what} must be text without the characters \\x1d-\\x1f, got {value!r}"
        )
    return text
