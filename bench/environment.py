"""Where the figures come from: without this a run cannot be compared with another one."""

from __future__ import annotations

import os
import platform
import subprocess
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

import redis

from pinning import original_cpus
from stores import cache_support

#: Packages whose versions are recorded when installed (peers included).
PACKAGES = (
    "ctxstore",
    "redis",
    "hiredis",
    "msgpack",
    "fakeredis",
    "pydantic",
    "matplotlib",
    "langchain-community",
    "openai-agents",
    "llama-index-storage-chat-store-redis",
)
_REPOSITORY = Path(__file__).resolve().parent.parent


def load_average() -> list[float]:
    """1-, 5- and 15-minute load averages: other work on the machine shows up in every figure."""
    return [round(value, 2) for value in os.getloadavg()]


def _versions() -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


def git_commit() -> str:
    """The commit of the code measured, ``+dirty`` when the work tree has changes."""

    def git(*arguments: str) -> str:
        done = subprocess.run(
            ["git", "-C", str(_REPOSITORY), *arguments],
            capture_output=True,
            text=True,
            check=False,
        )
        return done.stdout.strip()

    commit = git("rev-parse", "--short=12", "HEAD") or "unknown"
    return commit + ("+dirty" if git("status", "--porcelain", "--untracked-files=no") else "")


def environment(
    mode: str, placement: str, server_version: str, load_before: list[float]
) -> dict[str, Any]:
    return {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "mode": mode,
        "cpu_count": os.cpu_count(),
        "cpus_available": len(original_cpus()),
        "machine": f"{platform.system()} {platform.machine()}",
        "placement": placement,
        "python": platform.python_version(),
        "parser": "hiredis" if redis.utils.HIREDIS_AVAILABLE else "python parser",
        "redis_server": server_version,
        "versions": _versions(),
        "cache": cache_support(),
        "git_commit": git_commit(),
        "load_average_start": load_before,
    }
