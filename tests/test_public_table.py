"""The public surface comes from one table: ``ctxstore.PUBLIC`` (name -> module), which
``__all__``, the lazy imports and the imports type checkers see agree with; every root name is
a precise type to mypy (none is ``Any``); and every name and module path of ctxstore 0.3 still
works for this release, with a DeprecationWarning, from its new home."""

from __future__ import annotations

import ast
import importlib
import json
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import ctxstore
from ctxstore._base.exports import MOVED_MODULES, RENAMED

ROOT = Path(__file__).resolve().parents[1]
INIT = ROOT / "src" / "ctxstore" / "__init__.py"
#: Every module of ctxstore 0.3 and its public names (``__all__`` for the root).
API_03 = json.loads((ROOT / "tests" / "data" / "api-0.3.json").read_text())

#: Names of 0.3 modules that are gone, with why: internals of the machinery this release
#: replaced (one plan vocabulary, the Lua library, the server registry), or typing variables.
REMOVED = {
    "ctxstore.context.fragment": {"Steps", "drive_async", "drive_sync"},  # plans: Await effects
    "ctxstore.context.streamed_turn": {"Step"},  # plans: Effect requests
    "ctxstore.core.exports": {"ExportStep"},  # plans: Run and Emit
    "ctxstore.core.durability": {"durability_setting"},  # Settings checks; durability_of
    "ctxstore.core.scripts": {"PRELUDE", "needed_prelude", "prelude_blocks"},  # lua/lib
    "ctxstore.core.state": {  # the bounded ServerRegistry
        "mark_server_checked",
        "server_checked",
        "shared_chain_cache",
        "shared_owner_cache",
    },
    "ctxstore.plans": {"aiterate_plan", "iterate_plan"},  # drive / adrive with a performer
    "ctxstore.store": {"T"},  # a TypeVar
    "ctxstore.transfer": {"*"},  # the import and export drivers: plans now
}


def type_checking_names() -> set[str]:
    """The names ``ctxstore/__init__.py`` imports under ``if TYPE_CHECKING:``."""
    tree = ast.parse(INIT.read_text())
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            return {
                alias.asname or alias.name
                for statement in node.body
                if isinstance(statement, ast.ImportFrom)
                for alias in statement.names
            }
    return set()


def eager_names() -> set[str]:
    """The names ``ctxstore/__init__.py`` imports at import time (the error classes)."""
    tree = ast.parse(INIT.read_text())
    return {
        alias.asname or alias.name
        for node in tree.body
        if isinstance(node, ast.ImportFrom) and node.module == "ctxstore.errors"
        for alias in node.names
    }


def test_all_the_lazy_table_and_the_type_checking_imports_agree() -> None:
    assert sorted(ctxstore.__all__) == sorted(ctxstore.PUBLIC)
    assert type_checking_names() | eager_names() == set(ctxstore.PUBLIC)
    assert not set(ctxstore.PUBLIC) & set(ctxstore.MOVED)


def test_the_root_is_short() -> None:
    # 41: ctxstore.preload() is called at a server's start, by name, from the root.
    assert 30 <= len(ctxstore.__all__) <= 41


@pytest.mark.parametrize("name", sorted(ctxstore.PUBLIC))
def test_each_root_name_is_the_object_its_module_defines(name: str) -> None:
    home = importlib.import_module(ctxstore.PUBLIC[name])
    assert getattr(ctxstore, name) is getattr(home, name)


def test_no_root_name_is_any_to_mypy(tmp_path: Path) -> None:
    """What user code sees: mypy, reading the installed package (py.typed), reveals a precise
    type for every public name."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import ctxstore\n"
        + "".join(f"reveal_type(ctxstore.{name})\n" for name in ctxstore.__all__)
    )
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--no-error-summary",
            "--cache-dir",
            str(tmp_path / "cache"),
            str(probe),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    revealed = [line for line in result.stdout.splitlines() if "Revealed type is" in line]
    assert len(revealed) == len(ctxstore.__all__), result.stdout + result.stderr
    assert [line for line in revealed if 'Revealed type is "Any"' in line] == []


@pytest.mark.parametrize("name", sorted(ctxstore.MOVED))
def test_a_root_name_that_moved_still_works_and_warns(name: str) -> None:
    with pytest.warns(DeprecationWarning, match=f"ctxstore.{name} moved"):
        value = getattr(ctxstore, name)
    assert value is getattr(importlib.import_module(ctxstore.MOVED[name]), name)
    assert name in API_03["ctxstore"]


def test_every_root_name_of_the_last_release_still_resolves() -> None:
    assert set(API_03["ctxstore"]) <= set(ctxstore.PUBLIC) | set(ctxstore.MOVED)


@pytest.mark.parametrize("module", sorted(MOVED_MODULES))
def test_an_old_module_path_still_imports_and_warns(module: str) -> None:
    # Importing a module imports its parents first, and an old parent path warns too: whether
    # it is still in sys.modules depends on the tests this worker ran before. The parents are
    # imported quietly first, so the one warning the block sees is the module's own whatever
    # the order (pytest re-emits a warning the block did not match, which the suite's filter
    # turns into an error).
    import_parents_quietly(module)
    sys.modules.pop(module, None)
    with pytest.warns(DeprecationWarning, match=re.escape(f"{module} moved")) as seen:
        old = importlib.import_module(module)
    assert [str(w.message).split(" moved")[0] for w in seen] == [module]
    gone = REMOVED.get(module, set())
    if "*" in gone:
        return
    for name in API_03.get(module, []):
        if name in gone:
            continue
        value = getattr(old, name)
        if name in RENAMED.get(module, {}):
            home, new_name = RENAMED[module][name]
            assert value is getattr(importlib.import_module(home), new_name)
        else:
            assert any(
                value is getattr(importlib.import_module(home), name, None)
                for home in MOVED_MODULES[module]
            ), name


def import_parents_quietly(module: str) -> None:
    """Import each package above ``module`` with their DeprecationWarnings silenced."""
    parts = module.split(".")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        for end in range(2, len(parts)):
            importlib.import_module(".".join(parts[:end]))


def test_every_module_of_the_last_release_is_still_importable() -> None:
    gone = {module for module, names in REMOVED.items() if "*" in names}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        for module, names in API_03.items():
            if module in gone:
                continue
            loaded = importlib.import_module(module)
            missing = [
                name
                for name in names
                if name not in REMOVED.get(module, set()) and not hasattr(loaded, name)
            ]
            assert missing == [], module
