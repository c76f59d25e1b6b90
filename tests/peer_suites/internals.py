"""A pytest plugin for the peers' suites: deselects the tests listed as using the peer's
private internals, by exact name (``-k`` would match substrings and could drop a behavioural
test whose name merely contains a listed one), and fails the run when a listed name matches no
test, so the list cannot go stale when a peer renames a test.

``run.py`` passes the names in ``PEER_INTERNALS`` (one per line) and loads this with
``-p internals``.
"""

from __future__ import annotations

import os

import pytest


def _listed() -> set[str]:
    return {name for name in os.environ.get("PEER_INTERNALS", "").splitlines() if name}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    listed = _listed()
    kept: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    seen: set[str] = set()
    for item in items:
        name = getattr(item, "originalname", item.name)
        if name in listed:
            dropped.append(item)
            seen.add(name)
        else:
            kept.append(item)
    stale = sorted(listed - seen)
    if stale:
        raise pytest.UsageError(f"listed as internals but no such test: {', '.join(stale)}")
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
