"""The compaction worker (``ctxstore worker``): see :mod:`ctxstore.worker.runner`.

Names load on first use, so the CLI (which only registers the command) stays light.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "GROUP": "ctxstore.worker.streams",
    "Job": "ctxstore.worker.streams",
    "Worker": "ctxstore.worker.runner",
    "WorkerStats": "ctxstore.worker.runner",
    "list_dead_letters": "ctxstore.worker.probes",
    "worker_alive": "ctxstore.worker.probes",
}

__all__ = ["GROUP", "Job", "Worker", "WorkerStats", "list_dead_letters", "worker_alive"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'ctxstore.worker' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
