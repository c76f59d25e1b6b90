"""LocalKeyProvider: key-encryption keys and one secret per subject, in a directory of its own
(apart from Redis and from Redis's backups) or in memory.

A data key is wrapped under a key derived from the current key-encryption key and the
subject's secret (HKDF-SHA256), bound to the subject's name: ``destroy(subject)`` deletes the
secret, and no key-encryption key alone can unwrap that subject's data keys again. A wrapped
key names the key-encryption key and the secret it was made with, so keys wrapped before a
rotation still unwrap, and a subject created again after ``destroy`` (a new user of the same
id) never opens the old one's keys.

The directory::

    current              the id of the current key-encryption key
    keys/<key id>        a key-encryption key: 32 random bytes
    subjects/<sha256>    a subject's secret: its 8-byte id, then 32 random bytes

Directories are made 0700 and files 0600; a new file is written whole before it appears, so
two processes that make the same subject's secret at once agree on the first one's.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import threading
from collections.abc import Mapping
from pathlib import Path

from ctxstore.crypto.aead import KEY_BYTES, UnauthenticError, decrypt, derive, encrypt
from ctxstore.crypto.seal import check_key_id
from ctxstore.errors import ConfigurationError, CorruptionError, KeyUnavailableError

_WRAPPED = b"cw1"
_SECRET_ID_BYTES = 8
_INFO = b"ctxstore data key v1"


def new_key_id() -> str:
    """A fresh key-encryption key's id: ``kek-`` and 10 random base32 characters."""
    return "kek-" + base64.b32encode(os.urandom(10)).decode().lower()[:10]


class _MemoryVault:
    """The keys and secrets of a provider made with :meth:`LocalKeyProvider.from_keys`."""

    def __init__(self, keys: Mapping[str, bytes], current: str) -> None:
        self.keys = dict(keys)
        self.current = current
        self.secrets: dict[str, bytes] = {}

    def key(self, key_id: str) -> bytes | None:
        return self.keys.get(key_id)

    def add(self, key_id: str, key: bytes, *, current: bool) -> None:
        self.keys[key_id] = key
        if current:
            self.current = key_id

    def secret(self, subject: str, *, create: bool) -> bytes | None:
        found = self.secrets.get(subject)
        if found is None and create:
            found = self.secrets.setdefault(subject, os.urandom(_SECRET_ID_BYTES + KEY_BYTES))
        return found

    def destroy(self, subject: str) -> None:
        self.secrets.pop(subject, None)


class _DirectoryVault:
    """The keys and secrets of a provider kept in a directory (see the module)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        for folder in ("keys", "subjects"):
            (path / folder).mkdir(mode=0o700, exist_ok=True)
        marker = path / "current"
        if not marker.exists():
            if any((path / "keys").iterdir()):
                raise ConfigurationError(
                    f"{path} holds key-encryption keys but no 'current' file naming one"
                )
            key_id = new_key_id()
            self._write(path / "keys" / key_id, os.urandom(KEY_BYTES))
            self._replace(marker, key_id.encode())
        self.current = check_key_id(marker.read_text().strip())
        if self.key(self.current) is None:
            raise ConfigurationError(f"{path}: the current key {self.current!r} is missing")

    def key(self, key_id: str) -> bytes | None:
        try:
            found = (self.path / "keys" / check_key_id(key_id)).read_bytes()
        except FileNotFoundError:
            return None
        if len(found) != KEY_BYTES:
            raise CorruptionError(
                f"{self.path / 'keys' / key_id}: not a 32-byte key", key=str(self.path)
            )
        return found

    def add(self, key_id: str, key: bytes, *, current: bool) -> None:
        self._write(self.path / "keys" / key_id, key)
        if current:
            self._replace(self.path / "current", key_id.encode())
            self.current = key_id

    def _secret_path(self, subject: str) -> Path:
        return self.path / "subjects" / hashlib.sha256(subject.encode()).hexdigest()

    def secret(self, subject: str, *, create: bool) -> bytes | None:
        path = self._secret_path(subject)
        try:
            return path.read_bytes()
        except FileNotFoundError:
            if not create:
                return None
        with contextlib.suppress(FileExistsError):  # another process made it first: theirs
            self._write(path, os.urandom(_SECRET_ID_BYTES + KEY_BYTES))
        return path.read_bytes()

    def destroy(self, subject: str) -> None:
        self._secret_path(subject).unlink(missing_ok=True)

    @staticmethod
    def _write(path: Path, data: bytes) -> None:
        """A new file, written whole before it appears under its name (never replaced)."""
        staging = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
        descriptor = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(descriptor, "wb") as file:
                file.write(data)
                file.flush()
                os.fsync(file.fileno())
            os.link(staging, path)  # FileExistsError when it is there already
        finally:
            staging.unlink(missing_ok=True)

    @staticmethod
    def _replace(path: Path, data: bytes) -> None:
        staging = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
        descriptor = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(staging, path)


class LocalKeyProvider:
    """A :class:`~ctxstore.crypto.KeyProvider` whose keys are in ``path`` (see the module); an
    empty or missing directory gets its first key-encryption key. Keep the directory apart from
    Redis's files and never in the same backup: whoever holds both reads everything."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._vault: _MemoryVault | _DirectoryVault = _DirectoryVault(Path(path))
        self._lock = threading.Lock()

    @classmethod
    def existing(cls, path: str | os.PathLike[str]) -> LocalKeyProvider:
        """A provider on a directory that holds keys already (its ``current`` file); a
        ``ConfigurationError`` for any other path: an operator's mistyped path must not start
        a new, empty set of keys that opens nothing."""
        folder = Path(path)
        if not (folder / "current").is_file():
            raise ConfigurationError(
                f"{folder} is not a key directory of LocalKeyProvider (it has no 'current' file)"
            )
        return cls(folder)

    @classmethod
    def from_keys(cls, keys: Mapping[str, bytes], *, current: str) -> LocalKeyProvider:
        """A provider that holds everything in memory: ``keys`` (key id -> 32 bytes), the
        subjects' secrets made as they are needed (tests, one process)."""
        checked: dict[str, bytes] = {}
        for key_id, key in keys.items():
            if not isinstance(key, bytes) or len(key) != KEY_BYTES:
                raise ConfigurationError(f"key {key_id!r} must be {KEY_BYTES} bytes")
            checked[check_key_id(key_id)] = key
        if current not in checked:
            raise ConfigurationError(f"current={current!r} is none of the keys given")
        provider = cls.__new__(cls)
        provider._vault = _MemoryVault(checked, current)
        provider._lock = threading.Lock()
        return provider

    @property
    def current_key_id(self) -> str:
        return self._vault.current

    def add_key(self, *, make_current: bool = True) -> str:
        """A new key-encryption key (made current unless asked not to); returns its id."""
        key_id = new_key_id()
        with self._lock:
            self._vault.add(key_id, os.urandom(KEY_BYTES), current=make_current)
        return key_id

    def wrap(self, data_key: bytes, *, subject: str) -> bytes:
        if not isinstance(data_key, bytes) or len(data_key) != KEY_BYTES:
            raise ConfigurationError(f"a data key is {KEY_BYTES} bytes")
        with self._lock:
            key_id = self._vault.current
            key = self._vault.key(key_id)
            secret = self._vault.secret(_subject(subject), create=True)
        if key is None or secret is None:  # the current key is checked when the vault opens
            raise KeyUnavailableError(
                f"the current key {key_id!r} is not held by this provider", key_id=key_id
            )
        name = key_id.encode()
        header = _WRAPPED + bytes((len(name),)) + name + secret[:_SECRET_ID_BYTES]
        wrapping = derive(key, salt=secret[_SECRET_ID_BYTES:], info=_INFO)
        return header + encrypt(wrapping, data_key, header + subject.encode())

    def unwrap(self, wrapped: bytes, *, subject: str) -> bytes:
        header, key_id, secret_id = _wrapped_header(wrapped, subject)
        with self._lock:
            key = self._vault.key(key_id)
            secret = self._vault.secret(_subject(subject), create=False)
        if key is None:
            raise KeyUnavailableError(
                f"the key-encryption key {key_id!r} that wrapped {subject!r}'s data key is "
                f"not held by this provider",
                subject=subject,
                key_id=key_id,
            )
        if secret is None or secret[:_SECRET_ID_BYTES] != secret_id:
            raise KeyUnavailableError(
                f"{subject!r}'s data key was destroyed (its records cannot be read again)",
                subject=subject,
                key_id=key_id,
            )
        wrapping = derive(key, salt=secret[_SECRET_ID_BYTES:], info=_INFO)
        try:
            return decrypt(wrapping, wrapped[len(header) :], header + subject.encode())
        except UnauthenticError as error:
            raise CorruptionError(
                f"a wrapped data key of {subject!r} does not open (altered, or another subject's)",
                subject=subject,
                key_id=key_id,
            ) from error

    def destroy(self, subject: str) -> None:
        with self._lock:
            self._vault.destroy(_subject(subject))


def _subject(subject: object) -> str:
    if not isinstance(subject, str) or not subject:
        raise ConfigurationError(f"a key's subject is a non-empty string, got {subject!r}")
    return subject


def _wrapped_header(wrapped: bytes, subject: str) -> tuple[bytes, str, bytes]:
    bad = CorruptionError(f"not a wrapped data key of {subject!r}", subject=subject)
    if not isinstance(wrapped, bytes) or not wrapped.startswith(_WRAPPED) or len(wrapped) < 5:
        raise bad
    size = wrapped[len(_WRAPPED)]
    start = len(_WRAPPED) + 1
    end = start + size + _SECRET_ID_BYTES
    try:
        key_id = check_key_id(wrapped[start : start + size].decode("ascii"))
    except (UnicodeDecodeError, ConfigurationError):
        raise bad from None
    if len(wrapped) < end:
        raise bad
    return wrapped[:end], key_id, wrapped[start + size : end]
