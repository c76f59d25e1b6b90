"""``CtxStoreSaver`` and ``AsyncCtxStoreSaver``: LangGraph checkpointers on a ctxstore store.

Both build the same operations (:mod:`.operations`) from LangGraph's arguments and turn their
results into LangGraph's tuples in :class:`_SaverCore`; the sync saver runs them with
``Store.run``, the async one with ``await AsyncStore.run``. Nothing else differs.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
    get_checkpoint_id,
    get_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from ctxstore._base.plans import Emit, Plan, Run, adrive, aperformer, drive, performer
from ctxstore._core.protocol import Operation
from ctxstore.errors import ConfigurationError, ValidationError
from ctxstore.integrations.langgraph import operations as ops
from ctxstore.integrations.langgraph.layout import US, part
from ctxstore.store.async_store import AsyncStore, connect_async
from ctxstore.store.sync_store import Store, connect

#: The most checkpoints one page of ``list`` reads.
MAX_PAGE = 100
#: Threads read from the namespace's index at a time by ``list(None)``.
THREAD_PAGE = 100


class _SaverCore(BaseCheckpointSaver[str]):
    """What the two savers share: LangGraph's arguments to operations, results to tuples."""

    def __init__(self, store: Any, *, serde: SerializerProtocol | None = None) -> None:
        super().__init__(serde=serde)
        if not hasattr(store, "state") or not hasattr(store, "run"):
            raise ConfigurationError(
                f"a LangGraph saver takes a ctxstore store, got {type(store).__name__}"
            )
        self.store = store
        self._state = store.state

    # --- arguments to operations -----------------------------------------------------------

    @staticmethod
    def _where(config: RunnableConfig) -> tuple[str, str, str | None]:
        configurable = config.get("configurable") or {}
        thread_id = configurable.get("thread_id")
        if thread_id is None:
            raise ValidationError("a LangGraph config names its thread: configurable.thread_id")
        return str(thread_id), str(configurable.get("checkpoint_ns", "")), get_checkpoint_id(config)

    def _put_op(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> tuple[Operation[None], RunnableConfig]:
        thread_id, ns, parent = self._where(config)
        body = dict(checkpoint)
        values: dict[str, Any] = body.pop("channel_values", {}) or {}  # type: ignore[assignment]
        if all(type(version) is str for version in checkpoint["channel_versions"].values()):
            body.pop("channel_versions")  # the record's header names them, once
        meta = get_checkpoint_metadata(config, metadata)
        blobs = [
            (
                channel,
                str(version),
                self.serde.dumps_typed(values[channel]) if channel in values else None,
            )
            for channel, version in new_versions.items()
        ]
        record = ops.checkpoint_record(
            parent,
            str(meta.get("run_id") or ""),
            {channel: str(version) for channel, version in checkpoint["channel_versions"].items()},
            self.serde.dumps_typed(body),
            self.serde.dumps_typed(meta),
        )
        stored: RunnableConfig = {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": ns,
                "checkpoint_id": checkpoint["id"],
            }
        }
        run_id = str(meta.get("run_id") or "")
        operation = ops.put(self._state, thread_id, ns, checkpoint["id"], record, blobs, run_id)
        return operation, stored

    def _writes_op(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str,
    ) -> Operation[int]:
        thread_id, ns, checkpoint_id = self._where(config)
        if checkpoint_id is None:
            raise ValidationError("writes go to a checkpoint: configurable.checkpoint_id")
        members = []
        for index, (channel, value) in enumerate(writes):
            special = WRITES_IDX_MAP.get(channel)
            member = ops.write_member(
                part(ns, "checkpoint_ns"), part(checkpoint_id, "a checkpoint id"), task_path,
                task_id, index if special is None else special, channel,
            )  # fmt: skip
            members.append((member, self.serde.dumps_typed(value), special is not None))
        return ops.put_writes(self._state, thread_id, members)

    def _get_op(self, config: RunnableConfig) -> Operation[ops.Stored | None]:
        thread_id, ns, checkpoint_id = self._where(config)
        return ops.get(self._state, thread_id, ns, checkpoint_id)

    def _history_op(
        self, config: RunnableConfig, channels: Sequence[str]
    ) -> Operation[dict[str, tuple[ops.Typed | None, list[tuple[str, str, ops.Typed]]]]]:
        thread_id, ns, checkpoint_id = self._where(config)
        return ops.history(self._state, thread_id, ns, checkpoint_id, channels)

    # --- results to tuples -------------------------------------------------------------------

    def _tuple(self, stored: ops.Stored) -> CheckpointTuple:
        def config(checkpoint_id: str) -> RunnableConfig:
            return {
                "configurable": {
                    "thread_id": stored.thread_id,
                    "checkpoint_ns": stored.ns,
                    "checkpoint_id": checkpoint_id,
                }
            }

        checkpoint: Checkpoint = self.serde.loads_typed(stored.checkpoint)
        if "channel_versions" not in checkpoint:
            checkpoint["channel_versions"] = dict(stored.versions)
        checkpoint["channel_values"] = {
            channel: self.serde.loads_typed(blob) for channel, blob in stored.blobs.items()
        }
        return CheckpointTuple(
            config=config(stored.checkpoint_id),
            checkpoint=checkpoint,
            metadata=self.serde.loads_typed(stored.metadata),
            parent_config=config(stored.parent_id) if stored.parent_id else None,
            pending_writes=[
                (task_id, channel, self.serde.loads_typed(value))
                for task_id, channel, value in stored.writes
            ],
        )

    def _history(
        self, found: Mapping[str, tuple[ops.Typed | None, list[tuple[str, str, ops.Typed]]]]
    ) -> dict[str, DeltaChannelHistory]:
        out: dict[str, DeltaChannelHistory] = {}
        for channel, (seed, writes) in found.items():
            entry: DeltaChannelHistory = {
                "writes": [(task, ch, self.serde.loads_typed(value)) for task, ch, value in writes]
            }
            if seed is not None:
                entry["seed"] = self.serde.loads_typed(seed)
            out[channel] = entry
        return out

    def _prune_op(self, thread_ids: Sequence[str], strategy: str) -> Operation[Any]:
        threads = [str(thread) for thread in thread_ids]
        if strategy == "delete":
            return ops.delete_threads(self._state, threads)
        if strategy != "keep_latest":
            raise ValidationError(
                f"a prune strategy is 'keep_latest' or 'delete', got {strategy!r}"
            )
        return ops.prune(self._state, threads)

    @staticmethod
    def _page_size(limit: int | None) -> int:
        return min(max(ops.PAGE, limit or ops.PAGE), MAX_PAGE)

    @staticmethod
    def _matches(metadata: Mapping[str, Any], filter: Mapping[str, Any] | None) -> bool:
        return not filter or all(metadata.get(key) == value for key, value in filter.items())

    @staticmethod
    def _cursor(stored: ops.Stored, ns: str | None) -> str:
        if ns is None:
            return f"{stored.checkpoint_id}{US}{stored.ns}"
        return f"{stored.ns}{US}{stored.checkpoint_id}"

    @staticmethod
    def _list_scope(config: RunnableConfig | None) -> tuple[str | None, str | None, str | None]:
        if config is None:
            return None, None, None
        configurable = config.get("configurable") or {}
        ns = configurable.get("checkpoint_ns")
        return (
            str(configurable["thread_id"]),
            None if ns is None else str(ns),
            get_checkpoint_id(config),
        )

    @staticmethod
    def _first_cursor(ns: str | None, before: RunnableConfig | None) -> str:
        before_id = get_checkpoint_id(before) if before else None
        if not before_id:
            return ""
        return before_id if ns is None else f"{ns}{US}{before_id}"

    def _list_plan(
        self,
        config: RunnableConfig | None,
        *,
        filter: Mapping[str, Any] | None,
        before: RunnableConfig | None,
        limit: int | None,
    ) -> Plan[None]:
        """``list``'s checkpoints, newest first: the one named, or the thread's (every
        thread's of the namespace for ``None``), a page of at least 10 a round trip, filtered
        by metadata, before ``before``, ``limit`` at most."""
        thread_id, ns, only = self._list_scope(config)
        if thread_id is not None and only is not None:
            found = yield Run(ops.get(self._state, thread_id, ns or "", only))
            if found is not None and limit != 0:
                item = self._tuple(found)
                if self._matches(item.metadata, filter):
                    yield Emit(item)
            return
        if thread_id is not None:
            yield from self._thread_plan(thread_id, ns, before, filter, limit)
            return
        after = ""
        left = limit
        while left is None or left > 0:
            batch = yield Run(ops.thread_ids(self._state, after, THREAD_PAGE))
            if not batch:
                return
            after = batch[-1]
            for thread in batch:
                left = yield from self._thread_plan(thread, ns, before, filter, left)

    def _thread_plan(
        self,
        thread_id: str,
        ns: str | None,
        before: RunnableConfig | None,
        filter: Mapping[str, Any] | None,
        left: int | None,
    ) -> Plan[int | None]:
        """One thread's checkpoints for ``list``, page by page; how many more may follow."""
        cursor = self._first_cursor(ns, before)
        while left is None or left > 0:
            size = self._page_size(left)
            found = yield Run(ops.page(self._state, thread_id, ns, cursor, size))
            for stored in found:
                item = self._tuple(stored)
                if (left is None or left > 0) and self._matches(item.metadata, filter):
                    left = None if left is None else left - 1
                    yield Emit(item)
            if len(found) < size:
                break
            cursor = self._cursor(found[-1], ns)
        return left

    def get_next_version(self, current: str | None, channel: None) -> str:  # noqa: ARG002
        """The next version of a channel: its count (12 digits, so versions compare as text,
        and after the longer ones of LangGraph's own savers), then 40 random bits, so that two
        forks reaching the same count never share a stored value (a value is stored once per
        version)."""
        if current is None:
            number = 0
        elif isinstance(current, int):
            number = current
        else:
            number = int(str(current).split(".")[0])
        return f"{number + 1:012d}.{secrets.randbits(40):010x}"


class CtxStoreSaver(_SaverCore):
    """A LangGraph checkpointer on a ctxstore :class:`~ctxstore.store.Store` (any URL:
    ``memory://``, ``local://``, ``redis://``, ``redis+cluster://``, Valkey). Each thread's
    keys share one slot; ``put``, ``put_writes``, ``get_tuple`` and
    ``get_delta_channel_history`` are one round trip each, ``list`` one per page of at least
    10. The store's ``ttl`` applies to a thread as a whole, re-armed by every write."""

    def __init__(self, store: Store, *, serde: SerializerProtocol | None = None) -> None:
        super().__init__(store, serde=serde)

    @classmethod
    @contextmanager
    def from_url(cls, url: str, **options: Any) -> Iterator[CtxStoreSaver]:
        """A saver on a store opened from ``url`` (``ctxstore.connect``'s options), closed
        after."""
        with connect(url, **options) as store:
            yield cls(store)

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        stored = self.store.run(self._get_op(config))
        return None if stored is None else self._tuple(stored)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        plan = self._list_plan(config, filter=filter, before=before, limit=limit)
        yield from drive(plan, performer(self.store.run))

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        operation, stored = self._put_op(config, checkpoint, metadata, new_versions)
        self.store.run(operation)
        return stored

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self.store.run(self._writes_op(config, writes, task_id, task_path))

    def delete_thread(self, thread_id: str) -> None:
        self.store.run(ops.delete_thread(self._state, str(thread_id)))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        self.store.run(ops.delete_for_runs(self._state, [str(run) for run in run_ids]))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self.store.run(ops.copy_thread(self._state, str(source_thread_id), str(target_thread_id)))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        self.store.run(self._prune_op(thread_ids, strategy))

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        if not channels:
            return {}
        return self._history(self.store.run(self._history_op(config, channels)))


class AsyncCtxStoreSaver(_SaverCore):
    """The async form of :class:`CtxStoreSaver`, on an :class:`~ctxstore.store.AsyncStore`."""

    def __init__(self, store: AsyncStore, *, serde: SerializerProtocol | None = None) -> None:
        super().__init__(store, serde=serde)

    @classmethod
    @asynccontextmanager
    async def from_url(cls, url: str, **options: Any) -> AsyncIterator[AsyncCtxStoreSaver]:
        """A saver on a store opened from ``url`` (``ctxstore.connect_async``'s options),
        closed after."""
        store = connect_async(url, **options)
        try:
            yield cls(store)
        finally:
            await store.close()

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        stored = await self.store.run(self._get_op(config))
        return None if stored is None else self._tuple(stored)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        plan = self._list_plan(config, filter=filter, before=before, limit=limit)
        async for item in adrive(plan, aperformer(self.store.run)):
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        operation, stored = self._put_op(config, checkpoint, metadata, new_versions)
        await self.store.run(operation)
        return stored

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await self.store.run(self._writes_op(config, writes, task_id, task_path))

    async def adelete_thread(self, thread_id: str) -> None:
        await self.store.run(ops.delete_thread(self._state, str(thread_id)))

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await self.store.run(ops.delete_for_runs(self._state, [str(run) for run in run_ids]))

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await self.store.run(
            ops.copy_thread(self._state, str(source_thread_id), str(target_thread_id))
        )

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await self.store.run(self._prune_op(thread_ids, strategy))

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        if not channels:
            return {}
        return self._history(await self.store.run(self._history_op(config, channels)))
