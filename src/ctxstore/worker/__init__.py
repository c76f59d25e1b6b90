"""The compaction worker (``ctxstore worker``): see :mod:`ctxstore.worker.runner`.

Names load on first use, so the CLI (which only registers the command) stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ctxstore._base.exports import lazy_exports

__all__ = [
    "GROUP",
    "Job",
    "Worker",
    "WorkerStats",
    "check_live",
    "list_dead_letters",
    "worker_alive",
    "worker_ready",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "GROUP": "ctxstore.worker.streams",
        "Job": "ctxstore.worker.streams",
        "Worker": "ctxstore.worker.runner",
        "WorkerStats": "ctxstore.worker.runner",
        "list_dead_letters": "ctxstore.worker.probes",
        "worker_alive": "ctxstore.worker.probes",
        "worker_ready": "ctxstore.worker.probes",
        "check_live": "ctxstore.worker.liveness",
    },
)

if TYPE_CHECKING:
    from ctxstore.worker.liveness import check_live
    from ctxstore.worker.probes import list_dead_letters, worker_alive, worker_ready
    from ctxstore.worker.runner import Worker, WorkerStats
    from ctxstore.worker.streams import GROUP, Job
