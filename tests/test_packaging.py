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
from ctxstore.core.scripts import script_dir
store = ctxstore.connect("memory://")
store.upsert_chat("c1", "alice")
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
def test_wheel_holds_every_lua_script(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    scripts = sorted(path.name for path in (ROOT / "lua").glob("*.lua"))
    assert scripts
    for script in scripts:
        assert f"ctxstore/lua/{script}" in names


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
