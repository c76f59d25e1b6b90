"""The wheel carries every Lua script and works on its own in a fresh virtual environment."""

from __future__ import annotations

import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SMOKE = """
import ctxstore
from ctxstore._core.scripts import script_dir
store = ctxstore.connect("memory://").for_user("alice")
store.upsert_chat("c1")
result = store.append("c1", "main", [{"role": "user", "content": "hi"}], expected_head=None)
assert store.get_chain("c1", result.head_message_id)[0]["message"]["content"] == "hi"
assert "site-packages" in str(script_dir()), script_dir()
print("ok")
"""


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(ROOT)],
        check=True,
        timeout=600,
    )
    [built] = out.glob("ctxstore-*.whl")
    return built


@pytest.mark.slow
def test_wheel_holds_every_lua_script_and_library_file(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    scripts = sorted(path.name for path in (ROOT / "lua").glob("*.lua"))
    assert scripts
    for script in scripts:
        assert f"ctxstore/lua/{script}" in names
    library = sorted(path.name for path in (ROOT / "lua" / "lib").glob("*.lua"))
    assert library
    for part in library:
        assert f"ctxstore/lua/lib/{part}" in names
    assert "ctxstore/messages/o200k_base.ranks" in names  # a cold start's token counts


@pytest.mark.slow
def test_wheel_installs_and_runs_in_a_fresh_venv(wheel: Path, tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "-q", str(wheel)], check=True, timeout=900)
    result = subprocess.run(
        [str(python), "-c", SMOKE],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


@pytest.mark.slow
def test_wheel_carries_its_type_information_license_and_metadata(wheel: Path) -> None:
    archive = zipfile.ZipFile(wheel)
    names = set(archive.namelist())
    assert "ctxstore/py.typed" in names
    assert any(name.endswith("licenses/LICENSE") for name in names)
    [metadata_name] = [name for name in names if name.endswith(".dist-info/METADATA")]
    metadata = archive.read(metadata_name).decode()
    assert "Classifier: Typing :: Typed" in metadata
    assert "Classifier: License :: OSI Approved :: MIT License" in metadata
    assert "Keywords: " in metadata
    import ctxstore

    assert f"\nVersion: {ctxstore.__version__}\n" in metadata  # one source of the version


USER_CODE = """
import ctxstore

store = ctxstore.connect("memory://").for_user("alice")
chat = store.upsert_chat("c1")
reveal_type(chat.updated_at)
count: str = store.append("c1", "main", [{"role": "user", "content": "x"}], expected_head=None)
"""


@pytest.mark.slow
def test_mypy_reads_the_types_of_user_code(tmp_path: Path) -> None:
    """py.typed: mypy checks code that uses ctxstore against its annotations (without it,
    every ctxstore name is Any and mistakes pass unseen)."""
    user = tmp_path / "user_code.py"
    user.write_text(USER_CODE)
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-incremental", "--follow-imports=silent", str(user)],
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert "import-untyped" not in result.stdout, result.stdout
    assert 'Revealed type is "int"' in result.stdout or 'Revealed type is "builtins.int"' in (
        result.stdout
    ), result.stdout
    assert "Incompatible types in assignment" in result.stdout, result.stdout
