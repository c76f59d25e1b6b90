"""A sealed value opens only under its key and where it was sealed (its associated data)."""

from __future__ import annotations

import os

import pytest

from ctxstore.crypto.seal import is_sealed, open_sealed, seal, sealed_key_id
from ctxstore.errors import ConfigurationError, CorruptionError

KEY = os.urandom(32)


def test_a_sealed_value_opens_where_it_was_sealed() -> None:
    sealed = seal(b"secret words", key=KEY, key_id="d1", aad=b"chat c1, position 3")
    assert b"secret words" not in sealed
    assert is_sealed(sealed)
    assert sealed_key_id(sealed, where="k") == "d1"
    assert open_sealed(sealed, key=KEY, aad=b"chat c1, position 3", where="k") == b"secret words"
    assert seal(b"secret words", key=KEY, key_id="d1", aad=b"x") != seal(
        b"secret words", key=KEY, key_id="d1", aad=b"x"
    )  # a fresh nonce each time


@pytest.mark.parametrize(
    "change",
    ["another place", "another key", "a flipped byte", "another key id", "truncated"],
)
def test_a_sealed_value_moved_or_altered_does_not_open(change: str) -> None:
    sealed = seal(b"secret words", key=KEY, key_id="d1", aad=b"chat c1, position 3")
    key, aad = KEY, b"chat c1, position 3"
    if change == "another place":
        aad = b"chat c1, position 4"
    elif change == "another key":
        key = os.urandom(32)
    elif change == "a flipped byte":
        sealed = sealed[:-1] + bytes((sealed[-1] ^ 1,))
    elif change == "another key id":
        sealed = sealed.replace(b"d1", b"d2", 1)
    else:
        sealed = sealed[:20]
    with pytest.raises(CorruptionError) as raised:
        open_sealed(sealed, key=key, aad=aad, where="ctx:{c1}:log")
    assert "ctx:{c1}:log" in str(raised.value)
    assert "secret" not in str(raised.value)


def test_what_is_no_sealed_value_is_corruption_and_a_bad_key_id_is_refused() -> None:
    with pytest.raises(CorruptionError):
        open_sealed(b"\x82plain msgpack", key=KEY, aad=b"", where="k")
    with pytest.raises(CorruptionError):
        sealed_key_id(b"cs1\x40", where="k")
    with pytest.raises(ConfigurationError):
        seal(b"x", key=KEY, key_id="", aad=b"")
