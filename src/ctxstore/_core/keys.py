"""The keyspace: a fixed set of keys per chat, all under one hash tag.

::

    <base>:{<chat>}:chat        HASH  owner, format, incarnation, title, times, active branch,
                                      counters, m:<metadata key>, u:<usage counter>
    <base>:{<chat>}:log         LIST  message records in write order (position = index)
    <base>:{<chat>}:alias       HASH  caller-chosen message id -> position
    <base>:{<chat>}:runs        ZSET  linear runs of the log: start -> "start:parent:depth"
    <base>:{<chat>}:branch      HASH  branch name -> "head pos, head id, created_at, seq, length"
    <base>:{<chat>}:checkpoint  HASH  checkpoint name -> "pos, message id, created_at, seq"
    <base>:{<chat>}:summary     HASH  reserved for compaction summaries
    <base>:{<chat>}:reqs        HASH  a ring of the last 32 writes' reply summaries (resent
                                      writes): slot -> "<request id>\t<summary>"
    <base>:{<chat>}:tok         STRING 6 bytes per log position: flags (tool result) and the
                                      tokens of the chain from its root through that message
    <base>:{<chat>}:staging:<token>:<name>  an import's copy of key <name> while it is built
                                      (expires on its own; renamed into place when published)
    <base>:{<chat>}:stream      STREAM the text of the chat's answers as they are streamed
    <base>:{<chat>}:stream_state HASH stream id -> record of each answer stream (live, done,
                                      failed); both expire on their own
    <base>:idx:chats            ZSET  chat id -> updated_at (every chat of the namespace)
    <base>:idx:user:{<user>}    ZSET  chat id -> updated_at (the chats of one user)
    <base>:owned:{<user>}       HASH  chat id -> "<recorded at (epoch ms)>\t<incarnation>": every
                                      chat the user owns, written before the chat's first key
                                      (see :mod:`ctxstore._core.ops.owner_records`)
    <base>:dkey:{<user>}        HASH  the user's data keys, wrapped by the key provider: "current"
                                      -> key id, <key id> -> wrapped key (stores with encryption;
                                      see :mod:`ctxstore._core.keyring`)
    <base>:jobs:{<base>:N}      STREAM compaction jobs of the chats of shard N (N < JOB_SHARDS)
    <base>:trimmed:{<base>:N}   STRING jobs of shard N's stream its bound trimmed untaken
    <base>:jobs:dead            STREAM jobs that failed for good, with their errors
    <base>:workers              ZSET  worker id -> last heartbeat (epoch ms)
    <base>:workers:last         HASH  worker id -> its last job: "<epoch ms>\t<outcome>\t<chat>"

``<base>`` is ``<prefix>`` or ``<prefix>:<namespace>``, so a tenant's keys match the ACL pattern
``<prefix>:<namespace>:*``. One hash tag per chat puts every key a script touches in one Cluster
slot; a chat is eleven keys whatever its length, so deleting it is one UNLINK and no request
needs SCAN (only the operators' sweep and purge scan, :mod:`ctxstore._core.ops.sweep`). A
message costs one list entry (its record: parent position, time, payload) and,
only when the caller chose its id, one alias entry: generated ids are ``<position>.<incarnation>``
and need no index. The indexes live in their own slots; on a single server the append script
moves them itself, on a Cluster they follow the script.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

from ctxstore._base.ids import check_key_id, check_key_prefix

#: How many streams compaction jobs are spread over (per namespace).
JOB_SHARDS = 8
#: How many chats' key sets a keyspace keeps (dropped all at once past that: it is a cache).
_CHAT_KEYS_KEPT = 4096

CHAT_KEY_NAMES = (
    "chat",
    "log",
    "alias",
    "runs",
    "branch",
    "checkpoint",
    "summary",
    "reqs",
    "tok",
    "stream",
    "stream_state",
)


#: The Redis type each chat key holds (``TYPE``'s answer).
CHAT_KEY_TYPES: dict[str, str] = {
    "chat": "hash",
    "log": "list",
    "alias": "hash",
    "runs": "zset",
    "branch": "hash",
    "checkpoint": "hash",
    "summary": "zset",
    "reqs": "hash",
    "tok": "string",
    "stream": "stream",
    "stream_state": "hash",
}


def expected_type(key: str) -> str | None:
    """The Redis type ``key`` must hold, told from its name: a chat's key by its last part,
    a listing index, a job stream; None for a key of no known kind."""
    if ":idx:" in key:
        return "zset"
    if ":jobs:" in key:
        return "stream"
    if ":trimmed:" in key:
        return "string"
    if ":dkey:{" in key:
        return "hash"
    if "}:" in key:
        return CHAT_KEY_TYPES.get(key.rsplit(":", 1)[-1])
    return None


@dataclass(frozen=True)
class ChatKeys:
    """The keys of one chat, looked up by the names used in the Lua script headers."""

    chat_id: str
    base: str
    _selected: dict[tuple[str, ...], tuple[str, ...]] = field(
        default_factory=dict, compare=False, repr=False
    )

    def key(self, name: str) -> str:
        if name not in CHAT_KEY_NAMES:
            raise KeyError(f"chats have no key named {name!r}")
        return f"{self.base}:{{{self.chat_id}}}:{name}"

    def staging(self, token: str, name: str) -> str:
        """Where an import builds the chat's key ``name`` before publishing it: beside the
        chat's keys (same hash tag, so one script renames it into place), under a name no read
        looks at, and expiring on its own (see :mod:`ctxstore._core.ops.transfer.imports`)."""
        if name not in CHAT_KEY_NAMES:
            raise KeyError(f"chats have no key named {name!r}")
        return f"{self.base}:{{{self.chat_id}}}:staging:{token}:{name}"

    def select(self, names: tuple[str, ...]) -> tuple[str, ...]:
        """The keys ``names`` name, in order (remembered: every call of a script asks again)."""
        selected = self._selected.get(names)
        if selected is None:
            selected = self._selected[names] = tuple(self.key(name) for name in names)
        return selected


@dataclass(frozen=True)
class Keyspace:
    """Key names for one prefix and optional tenant namespace."""

    prefix: str = "ctx"
    namespace: str | None = None
    _chats: dict[str, ChatKeys] = field(default_factory=dict, compare=False, repr=False)
    _user_indexes: dict[str, str] = field(default_factory=dict, compare=False, repr=False)
    _job_streams: list[str] = field(default_factory=list, compare=False, repr=False)
    _job_stream_of: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        check_key_prefix(self.prefix, "prefix", allow_colon=True)
        if self.namespace is not None:
            check_key_prefix(self.namespace, "namespace", allow_colon=False)

    @property
    def base(self) -> str:
        return self.prefix if self.namespace is None else f"{self.prefix}:{self.namespace}"

    def chat(self, chat_id: str) -> ChatKeys:
        """The keys of ``chat_id`` (validated); the last few thousand chats' keys are kept, since
        a worker serves the same chats turn after turn."""
        keys = self._chats.get(chat_id)
        if keys is None:
            keys = ChatKeys(check_key_id(chat_id, "chat_id"), self.base)
            if len(self._chats) >= _CHAT_KEYS_KEPT:
                self._chats.clear()
            self._chats[chat_id] = keys
        return keys

    @property
    def all_chats_index(self) -> str:
        return f"{self.base}:idx:chats"

    def user_index(self, user_id: str) -> str:
        index = self._user_indexes.get(user_id)
        if index is None:
            index = f"{self.base}:idx:user:{{{check_key_id(user_id, 'user_id')}}}"
            if len(self._user_indexes) >= _CHAT_KEYS_KEPT:
                self._user_indexes.clear()
            self._user_indexes[user_id] = index
        return index

    def job_stream(self, chat_id: str) -> str:
        """The compaction job stream of ``chat_id``'s shard: jobs spread over JOB_SHARDS
        streams, each its own hash tag, so no single key carries a whole cluster's jobs."""
        stream = self._job_stream_of.get(chat_id)
        if stream is None:
            stream = self.job_streams()[zlib.crc32(chat_id.encode("utf-8")) % JOB_SHARDS]
            if len(self._job_stream_of) >= _CHAT_KEYS_KEPT:
                self._job_stream_of.clear()
            self._job_stream_of[chat_id] = stream
        return stream

    def job_streams(self) -> tuple[str, ...]:
        """Every compaction job stream of the namespace (what workers read)."""
        if not self._job_streams:
            self._job_streams.extend(
                f"{self.base}:jobs:{{{self.base}:{shard}}}" for shard in range(JOB_SHARDS)
            )
        return tuple(self._job_streams)

    def job_keys(self, chat_id: str) -> tuple[str, str]:
        """The job stream of ``chat_id``'s shard and its trimmed-jobs counter."""
        stream = self.job_stream(chat_id)
        return stream, self.trimmed_counter(stream)

    def trimmed_counter(self, stream: str) -> str:
        """The count of the jobs ``stream`` (one of :meth:`job_streams`) trimmed before a
        worker took them: a key of the stream's slot."""
        return stream.replace(":jobs:{", ":trimmed:{", 1)

    @property
    def format_marker(self) -> str:
        """The keyspace's storage format: a hash of ``format``, ``release`` (the release that
        set it) and ``marked_at`` (ms), set by ``migrate`` (docs/compatibility.md)."""
        return f"{self.base}:format"

    @property
    def dead_letters(self) -> str:
        """Compaction jobs that failed for good, with their errors."""
        return f"{self.base}:jobs:dead"

    @property
    def workers(self) -> str:
        """Worker heartbeats: worker id -> the last beat (epoch ms)."""
        return f"{self.base}:workers"

    @property
    def worker_last_jobs(self) -> str:
        """Each worker's last job: worker id -> ``<epoch ms>\t<outcome>\t<chat id>``."""
        return f"{self.base}:workers:last"

    def owner_record(self, user_id: str) -> str:
        """The authoritative record of the chats ``user_id`` owns: a chat is added before its
        first key is written and removed only after its keys are gone, so it may name a chat
        whose creation failed, never miss one (unlike the listing index, which is kept best
        effort). In the user's slot, beside the user's listing index."""
        return f"{self.base}:owned:{{{check_key_id(user_id, 'user_id')}}}"

    def data_keys(self, user_id: str) -> str:
        """The data keys of ``user_id``, wrapped (stores with encryption): in the user's slot,
        beside the owner record, so erasing the user deletes them with it."""
        return f"{self.base}:dkey:{{{check_key_id(user_id, 'user_id')}}}"

    def indexes_of(self, user_id: str) -> tuple[str, str]:
        """The two index keys a chat of ``user_id`` is listed in."""
        return self.all_chats_index, self.user_index(user_id)
