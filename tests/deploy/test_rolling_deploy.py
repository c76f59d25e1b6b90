"""A rolling deploy: the previous release and this one write the same chats on one
redis-server at the same time (appends that rebase onto each other, branches, checkpoints,
compaction jobs each release's worker takes from the other's saves). Nothing is lost, neither
sees a ``CorruptionError`` (or any error), and ``verify`` is clean after, from both releases
(each verifies once both are done writing: a verify reads a chat and its cross-slot index
entries in separate commands, so a write landing between them would read as a mismatch).

The previous release is a wheel built in the test from a pinned commit of this repository (the
one the compatibility policy starts from, docs/compatibility.md; it calls the Lua as EVALSHA
scripts); it is kept in the pytest cache between runs. The same test runs with a process that
holds the previous Redis Functions library instead: this release's code under another library
name, as the library of the release before is, so two libraries serve one keyspace side by
side. The first format change after it extends this test: both releases share the
keyspace until ``migrate``, and after it the previous one is refused with a ``FormatError``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import pytest

import ctxstore
from ctxstore._core.scripts import load_library
from tests.support import servers
from tests.support.keyspace import raw_client

ROOT = Path(__file__).resolve().parents[2]
#: The previous release: main when the format policy began (format 2, ctxstore 0.4 before it).
PREVIOUS = "0026683"

WRITER = r"""
import json, sys
import ctxstore
from ctxstore.models import CompactionTrigger

url, namespace, who, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
store = ctxstore.connect(url, namespace=namespace, estimate_tokens=len)
admin = store.admin()
trigger = CompactionTrigger(soft_tokens=400, min_recent_messages=2)
written = []
for number in range(rounds):
    for chat in ("shared-0", "shared-1", "shared-2", f"own-{who}"):
        user = store.for_user("ada")
        user.upsert_chat(chat)
        head = user.load_branch(chat, "main").branch.head_message_id
        text = f"{who} {number} " + "x" * 40
        user.append(chat, "main", [{"role": "user", "content": text}], expected_head=head,
                    on_conflict="rebase", compaction=trigger)
        written.append([chat, text])
    if number % 5 == 0:
        user = store.for_user("ada")
        head = user.load_branch("shared-0", "main").branch.head_message_id
        user.create_branch("shared-0", head, name=f"{who}-{number}", activate=False)
        head = user.load_branch("shared-1", "main").branch.head_message_id
        user.upsert_checkpoint("shared-1", f"{who}-{number}", head)
from ctxstore.worker import Worker
Worker(url, namespaces=[namespace], compactify=lambda m: f"{who}: {len(m)} messages",
       estimate_tokens=len, poll_ms=20).run(burst=True)
print("written", flush=True)
sys.stdin.readline()  # both releases are done writing: a verify now sees no write under way
problems = {chat: [str(p) for p in admin.verify_chat(chat).problems]
            for chat in ("shared-0", "shared-1", "shared-2", "own-old", "own-new")
            if chat in {info.id for info in admin.list_chats(user_id="ada")}}
print(json.dumps({"release": ctxstore.__version__, "file": ctxstore.__file__,
                  "written": written, "problems": problems}))
"""


#: Run before the writer in the process of the previous library: this release's code under
#: another library name (another hash), loaded by its own calls beside this release's.
PREVIOUS_LIBRARY = r"""
import ctxstore._core.protocol as protocol, ctxstore._core.scripts as scripts
folder = scripts.script_dir()
bodies = tuple((name, "-- the previous library\n" + body) for name, body in scripts._bodies(folder))
previous = scripts.library_code(
    scripts._library(folder), bodies, checking=scripts.checking_service_rules()
)
scripts.load_library = protocol.load_library = lambda: previous
scripts.library_name = protocol.library_name = lambda: previous.name
"""


def release_folder(request: pytest.FixtureRequest) -> Path:
    """Where the previous release is kept: the pytest cache, so that it is built once; a
    temporary folder of the session when the cache is off (``-p no:cacheprovider``)."""
    cache: pytest.Cache | None = getattr(request.config, "cache", None)
    if cache is not None:
        return Path(cache.mkdir(f"ctxstore-{PREVIOUS}"))
    factory: pytest.TempPathFactory = request.getfixturevalue("tmp_path_factory")
    return factory.mktemp(f"ctxstore-{PREVIOUS}")


def previous_release(folder: Path) -> Path:
    """The previous release, built from ``PREVIOUS`` as a wheel and unpacked in ``folder``: a
    folder to put first on ``PYTHONPATH``."""
    site = folder / "site"
    if (site / "ctxstore" / "__init__.py").is_file():
        return site
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.fail("the rolling-deploy test builds the previous release from git history")
    with tempfile.TemporaryDirectory() as scratch:
        source = Path(scratch) / "src"
        source.mkdir()
        archive = Path(scratch) / "previous.tar"
        subprocess.run(
            ["git", "-C", str(ROOT), "archive", "--format=tar", "-o", str(archive), PREVIOUS],
            check=True,
        )
        with tarfile.open(archive) as tar:
            tar.extractall(source, filter="data")
        wheels = Path(scratch) / "wheels"
        subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels), source],
            check=True,
        )
        (wheel,) = wheels.glob("ctxstore-*.whl")
        with zipfile.ZipFile(wheel) as unpacked:
            unpacked.extractall(site)
    return site


def run_writer(
    url: str, namespace: str, who: str, rounds: int, site: Path | None, prelude: str = ""
) -> Any:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    if site is not None:
        env["PYTHONPATH"] = str(site)
    return subprocess.Popen(
        [sys.executable, "-c", prelude + WRITER, url, namespace, who, str(rounds)],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tempfile.gettempdir(),  # not the checkout: `import ctxstore` finds what PYTHONPATH says
    )


@pytest.mark.slow
@pytest.mark.parametrize("previous", ["release", "library"])
def test_the_previous_release_and_this_one_share_a_keyspace(
    request: pytest.FixtureRequest,
    redis_server: servers.RedisProcess,
    namespace: str,
    previous: str,
) -> None:
    site = previous_release(release_folder(request)) if previous == "release" else None
    prelude = PREVIOUS_LIBRARY if previous == "library" else ""
    rounds = 30
    old = run_writer(redis_server.url, namespace, "old", rounds, site, prelude)
    new = run_writer(redis_server.url, namespace, "new", rounds, None)
    results = {}
    for who, process in (("old", old), ("new", new)):  # each verifies once both have written
        assert process.stdout is not None
        if process.stdout.readline().strip() != "written":
            _out, err = process.communicate(timeout=60)
            pytest.fail(f"the {who} release failed before it verified:\n{err[-3000:]}")
    for who, process in (("old", old), ("new", new)):
        out, err = process.communicate("\n", timeout=300)
        assert process.returncode == 0, f"the {who} release failed:\n{err[-3000:]}"
        results[who] = json.loads(out.strip().splitlines()[-1])
    if site is not None:
        assert results["old"]["file"].startswith(str(site))
    else:  # both libraries were loaded, each by its own process's calls
        libraries = [entry[1] for entry in raw_client(redis_server.url).function_list("ctxstore_*")]
        assert len(set(libraries)) >= 2
        assert load_library().name.encode() in libraries
    assert results["new"]["release"] == ctxstore.__version__
    with ctxstore.connect(redis_server.url, namespace=namespace, estimate_tokens=len) as store:
        admin = store.admin()
        for who in ("old", "new"):
            assert results[who]["problems"] == {chat: [] for chat in results[who]["problems"]}
            for chat, text in results[who]["written"]:  # nothing lost
                chain = admin.load_branch(chat, "main").messages
                contents = [m["message"]["content"] for m in chain]
                assert text in contents, f"{who}'s {text!r} is missing from {chat}"
        for info in admin.list_chats(user_id="ada"):
            assert admin.verify_chat(info.id).problems == (), info.id
            summary = admin.load_branch(info.id, "main", after_summary=True).summary
            assert summary is not None, f"{info.id} was never compacted"
        branches = {branch.name for branch in admin.list_branches("shared-0")}
        assert {"old-0", "new-0", "old-25", "new-25"} <= branches
