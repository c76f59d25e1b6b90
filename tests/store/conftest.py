"""Fixtures shared by the store tests."""

from __future__ import annotations

from typing import Any

import pytest

from ctxstore import NewMessage


@pytest.fixture
def chat(store: Any) -> str:
    """Chat ``c1`` of alice holding ``m1`` (user "a") <- ``m2`` (assistant "b") on main."""
    return seed_chat(store)


def seed_chat(store: Any) -> str:
    """What :func:`chat` holds, written through ``store`` (any shell)."""
    store.upsert_chat("c1", "alice")
    store.append(
        "c1",
        "main",
        [
            NewMessage({"role": "user", "content": "a"}, id="m1"),
            NewMessage({"role": "assistant", "content": "b"}, id="m2"),
        ],
        expected_head=None,
    )
    return "c1"
