"""LocalKeyProvider: data keys wrapped per subject under the current key-encryption key, still
unwrapped after a rotation, never again after ``destroy``; kept in a directory (0700 / 0600)
or in memory; bad input refused with a ctxstore error."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from ctxstore.crypto import KeyProvider, LocalKeyProvider
from ctxstore.errors import ConfigurationError, CorruptionError, KeyUnavailableError

DATA_KEY = bytes(range(32))


@pytest.fixture(params=["directory", "memory"])
def provider(request: pytest.FixtureRequest, tmp_path: Path) -> LocalKeyProvider:
    if request.param == "directory":
        return LocalKeyProvider(tmp_path / "keys")
    return LocalKeyProvider.from_keys({"k1": os.urandom(32)}, current="k1")


def test_it_is_a_key_provider(provider: LocalKeyProvider) -> None:
    assert isinstance(provider, KeyProvider)


def test_a_wrapped_key_unwraps_for_its_subject_only(provider: LocalKeyProvider) -> None:
    wrapped = provider.wrap(DATA_KEY, subject="alice")
    assert DATA_KEY not in wrapped
    assert provider.unwrap(wrapped, subject="alice") == DATA_KEY
    with pytest.raises(KeyUnavailableError):  # bob has no secret: nothing can open it for him
        provider.unwrap(wrapped, subject="bob")
    provider.wrap(DATA_KEY, subject="bob")  # now he has one, still not alice's
    with pytest.raises((CorruptionError, KeyUnavailableError)):
        provider.unwrap(wrapped, subject="bob")


def test_an_altered_wrapped_key_is_corruption(provider: LocalKeyProvider) -> None:
    wrapped = bytearray(provider.wrap(DATA_KEY, subject="alice"))
    wrapped[-1] ^= 1
    with pytest.raises(CorruptionError):
        provider.unwrap(bytes(wrapped), subject="alice")
    with pytest.raises(CorruptionError):
        provider.unwrap(b"not a wrapped key", subject="alice")


def test_keys_wrapped_before_a_rotation_still_unwrap(provider: LocalKeyProvider) -> None:
    before = provider.wrap(DATA_KEY, subject="alice")
    first = provider.current_key_id
    second = provider.add_key()
    assert provider.current_key_id == second != first
    after = provider.wrap(DATA_KEY, subject="alice")
    assert first.encode() in before
    assert second.encode() in after
    assert provider.unwrap(before, subject="alice") == DATA_KEY
    assert provider.unwrap(after, subject="alice") == DATA_KEY


def test_destroy_makes_every_wrapped_key_of_the_subject_unreadable_for_good(
    provider: LocalKeyProvider,
) -> None:
    alice = provider.wrap(DATA_KEY, subject="alice")
    bob = provider.wrap(DATA_KEY, subject="bob")
    provider.destroy("alice")
    provider.destroy("alice")  # twice: nothing more to do
    with pytest.raises(KeyUnavailableError) as raised:
        provider.unwrap(alice, subject="alice")
    assert raised.value.details["subject"] == "alice"
    assert raised.value.details["key_id"] == provider.current_key_id
    provider.wrap(DATA_KEY, subject="alice")  # a new alice (the same user id, created again)
    with pytest.raises(KeyUnavailableError):
        provider.unwrap(alice, subject="alice")  # never opens the old one's keys
    assert provider.unwrap(bob, subject="bob") == DATA_KEY


def test_a_directory_provider_reads_back_what_another_instance_wrote(tmp_path: Path) -> None:
    folder = tmp_path / "keys"
    first = LocalKeyProvider(folder)
    wrapped = first.wrap(DATA_KEY, subject="alice")
    rotated = first.add_key()
    again = LocalKeyProvider(folder)
    assert again.current_key_id == rotated
    assert again.unwrap(wrapped, subject="alice") == DATA_KEY
    again.destroy("alice")
    with pytest.raises(KeyUnavailableError):
        first.unwrap(wrapped, subject="alice")


def test_the_directory_is_private(tmp_path: Path) -> None:
    folder = tmp_path / "keys"
    provider = LocalKeyProvider(folder)
    provider.wrap(DATA_KEY, subject="alice")
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    files = [path for path in folder.rglob("*") if path.is_file()]
    assert {stat.S_IMODE(path.stat().st_mode) for path in files} == {0o600}
    assert not [path for path in files if "alice" in path.name]  # subjects by hash only


def test_two_threads_making_one_subjects_secret_agree(tmp_path: Path) -> None:
    providers = [LocalKeyProvider(tmp_path / "keys") for _ in range(8)]
    wrapped: list[bytes] = []

    def wrap(provider: LocalKeyProvider) -> None:
        wrapped.append(provider.wrap(DATA_KEY, subject="alice"))

    threads = [threading.Thread(target=wrap, args=(p,)) for p in providers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for each in wrapped:
        assert providers[0].unwrap(each, subject="alice") == DATA_KEY


def test_bad_keys_and_arguments_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError):
        LocalKeyProvider.from_keys({"k1": b"short"}, current="k1")
    with pytest.raises(ConfigurationError):
        LocalKeyProvider.from_keys({"k1": os.urandom(32)}, current="k2")
    with pytest.raises(ConfigurationError):
        LocalKeyProvider.from_keys({"bad id!": os.urandom(32)}, current="bad id!")
    provider = LocalKeyProvider.from_keys({"k1": os.urandom(32)}, current="k1")
    with pytest.raises(ConfigurationError):
        provider.wrap(b"short", subject="alice")
    with pytest.raises(ConfigurationError):
        provider.wrap(DATA_KEY, subject="")
    folder = tmp_path / "keys"
    LocalKeyProvider(folder)
    (folder / "current").unlink()
    with pytest.raises(ConfigurationError):  # keys, but none named current
        LocalKeyProvider(folder)
