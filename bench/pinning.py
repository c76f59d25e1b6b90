"""CPU placement: the client and its redis-server on one CPU, concurrent writers on all.

Left to the scheduler, client and server sometimes share a CPU and sometimes not, and on a
virtual machine a wake-up on another vCPU adds tens of microseconds to every round trip (PING
measured 31 µs on one CPU and 56 µs across two on the reference machine), so figures moved
from run to run for no reason in the code. One request is in flight at a time, so sharing a
CPU costs the sequential caller nothing. The concurrent-writer scenario is the exception: its
processes are meant to run in parallel, so they get back every CPU the run started with.
"""

from __future__ import annotations

import os

_ORIGINAL: set[int] = set(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else set()


def pin_to_one_cpu() -> str:
    """Pin this process (and what it starts later: servers, helpers) to its last CPU."""
    if not hasattr(os, "sched_setaffinity"):
        return "unpinned (no sched_setaffinity here)"
    cpu = max(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpu})
    return f"client and server pinned to CPU {cpu}"


def original_cpus() -> frozenset[int]:
    """The CPUs this process could use before it pinned itself (import time of this module)."""
    return frozenset(_ORIGINAL)


def unpin(cpus: frozenset[int]) -> None:
    """Let the calling process use ``cpus`` (from :func:`original_cpus` of the parent: a
    spawned child imports this module already pinned)."""
    if cpus and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, cpus)
