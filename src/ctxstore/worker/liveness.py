"""A worker's own liveness, told without Redis: a file the worker touches each turn of its loop.

A liveness probe that reads Redis (``--check``: any worker's heartbeat) passes a hung pod while
a sibling beats, and fails every pod at once when Redis blips, so Kubernetes restarts the
whole fleet for nothing. The worker process instead keeps a small file on its pod: written when
it starts (its pid and its loop's interval, as JSON: the poll interval, at least a second,
which also bounds one turn's Redis calls), its modification time moved on every turn of the
loop (at most every ``interval_ms / 4``), removed when it stops. ``ctxstore worker --live``
passes while that process runs and its loop turned within 3 intervals. A Redis outage (or a
hung Redis) makes the loop wait and log, never stop turning: liveness holds, ``--ready`` (Redis
answers) fails, and Kubernetes takes the pod out of service without restarting it.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

#: Where the worker keeps the file unless told (``--live-file``, ``CTXSTORE_WORKER_LIVE_FILE``).
LIVE_FILE_ENV = "CTXSTORE_WORKER_LIVE_FILE"
#: A loop that has not turned for this many intervals is not live.
TURNS_MISSED = 3


def default_live_file() -> Path:
    """``$CTXSTORE_WORKER_LIVE_FILE``, else ``ctxstore-worker.live`` in the temporary folder
    (the pod's writable ``/tmp`` under a read-only root filesystem)."""
    chosen = os.environ.get(LIVE_FILE_ENV)
    return Path(chosen) if chosen else Path(tempfile.gettempdir()) / "ctxstore-worker.live"


class LivenessFile:
    """The file a running worker keeps (see the module)."""

    def __init__(self, path: str | os.PathLike[str], interval_ms: int) -> None:
        self.path = Path(path)
        self.interval_ms = interval_ms
        self._touched = 0.0

    def start(self) -> None:
        """Write the worker's pid and interval (atomically: a probe never reads half)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        staged = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        staged.write_text(json.dumps({"pid": os.getpid(), "interval_ms": self.interval_ms}))
        os.replace(staged, self.path)
        self._touched = time.monotonic()

    def turned(self) -> None:
        """The loop turned: move the file's time on (a stat-level write, throttled)."""
        now = time.monotonic()
        if (now - self._touched) * 1000 >= self.interval_ms / 4:
            with contextlib.suppress(OSError):  # a probe misses a beat; the worker goes on
                os.utime(self.path)
            self._touched = now

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            self.path.unlink()


@dataclass(frozen=True)
class Liveness:
    """What ``--live`` found: ``live``, and why not when not."""

    live: bool
    reason: str


def check_live(path: str | os.PathLike[str], now: float | None = None) -> Liveness:
    """Whether the worker that keeps ``path`` runs and turned its loop within
    ``TURNS_MISSED`` intervals (``now``: epoch seconds, for tests)."""
    file = Path(path)
    try:
        written = json.loads(file.read_text())
        pid, interval_ms = int(written["pid"]), int(written["interval_ms"])
        turned_at = file.stat().st_mtime
    except FileNotFoundError:
        return Liveness(False, f"no worker keeps {file} (not started, or stopped)")
    except (OSError, ValueError, KeyError, TypeError) as error:
        return Liveness(False, f"{file} is not a worker's liveness file: {error}")
    if not _running(pid):
        return Liveness(False, f"the worker that kept {file} (pid {pid}) is gone")
    age = (time.time() if now is None else now) - turned_at
    limit = TURNS_MISSED * interval_ms / 1000
    if age > limit:
        return Liveness(False, f"the worker's loop last turned {age:.1f} s ago (limit {limit} s)")
    return Liveness(True, f"the worker's loop turned {age:.1f} s ago")


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        return True
    return True
